"""Services own every write. Public ones are the outermost transaction (durable=True);
`*_locked` helpers run inside a caller's transaction with the rows already locked."""
