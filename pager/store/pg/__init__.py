"""The PostgreSQL backend of the store (SPEC §13, issue 14): several brokers share one database.

Imported only when `store` names a PostgreSQL database (psycopg is not loaded otherwise)."""
