package catalog

import "github.com/jackc/pgx/v5"

// QuoteIdent writes an identifier the way PostgreSQL's quote_ident does for
// ordinary names: bare when it is lower-case letters, digits, _ and $ not
// starting with a digit, else double-quoted with inner quotes doubled. It is
// for messages a person reads and may paste; a key word that needs quoting
// (a column named "select") is the one case it leaves bare, so SQL the
// program runs uses pgx.Identifier.Sanitize instead.
func QuoteIdent(name string) string {
	if name == "" {
		return `""`
	}
	for i, r := range name {
		if !(r == '_' || 'a' <= r && r <= 'z' || i > 0 && ('0' <= r && r <= '9' || r == '$')) {
			return pgx.Identifier{name}.Sanitize()
		}
	}
	return name
}
