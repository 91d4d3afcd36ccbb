-- Shared rate limits (issue 37): the limits that guard accounts or that an operator sets for a day
-- (sign-in per email and per address, registration per address, a visitor's daily messages) are
-- counted here, so they hold across nodes and restarts. One row per counted event; the key is the
-- SHA-256 of what is limited (an email or an address is not kept in clear).

CREATE TABLE limit_hits (
    id      INTEGER PRIMARY KEY AUTOINCREMENT,
    scope   TEXT NOT NULL,
    key     TEXT NOT NULL,
    at_ms   INTEGER NOT NULL
);

CREATE INDEX limit_hits_by_key ON limit_hits (scope, key, at_ms);
CREATE INDEX limit_hits_by_age ON limit_hits (scope, at_ms);
