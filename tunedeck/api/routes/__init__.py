"""One router per resource; each module pairs with a schema module of the same name."""
