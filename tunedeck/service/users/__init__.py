"""Users: the first start (database and first admin) and their stored bytes for the storage limit."""
