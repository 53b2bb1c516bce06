"""The dashboard's languages: one catalogue of its words per language, and which language a request gets."""
