package doctor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/bridge/rules"
	"github.com/pgimageai/pgimageai/catalog"
	"github.com/pgimageai/pgimageai/internal/pgerr"
	"github.com/pgimageai/pgimageai/provider"
	"github.com/pgimageai/pgimageai/replication"
	"github.com/pgimageai/pgimageai/state"
)

// ruleChecks checks the schema, the publication, each enabled rule of the
// group (its source table, image column, replica identity, model) and each
// model its rules use (its provider and options; whether its server
// answers).
func ruleChecks(ctx context.Context, src, tgt *pgx.Conn, cfg Config) ([]Check, error) {
	group := rules.GroupOrDefault(cfg.Group)
	rows, err := state.Rules(ctx, src, group, true)
	switch pgerr.SQLState(err) {
	case "":
	case pgerr.UndefinedTable, pgerr.InvalidSchemaName:
		return []Check{fail("schema", "pgimageai", "the source has no schema pgimageai (or an older one)", "run pgimageai migrate")}, nil
	default:
		return nil, err
	}
	if tgt != src {
		if _, _, err := state.ReadCheckpoint(ctx, tgt, cfg.Slot); err != nil {
			return []Check{fail("schema", "pgimageai on the target", err.Error(), "run pgimageai migrate --target-dsn …")}, nil
		}
	}
	models, err := state.Models(ctx, src)
	if err != nil {
		return nil, err
	}
	byName := map[string]provider.Model{}
	for _, m := range models {
		byName[m.Name] = m
	}
	published, pubFound, err := replication.PublishedTables(ctx, src, cfg.Publication)
	if err != nil {
		return nil, err
	}
	var out []Check
	if len(rows) == 0 {
		out = append(out, warn("rules", "enabled", fmt.Sprintf("no enabled rule in group %s", group), "INSERT INTO pgimageai.rules …: see docs/configuration.md"))
	}
	used := map[string]bool{}
	for _, rr := range rows {
		out = append(out, ruleCheck(ctx, src, rr, byName, published, pubFound, cfg)...)
		if _, ok := byName[rr.Model]; ok {
			used[rr.Model] = true
		}
	}
	names := make([]string, 0, len(used))
	for n := range used {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		out = append(out, modelCheck(ctx, byName[n], cfg))
	}
	return out, nil
}

func ruleCheck(ctx context.Context, src *pgx.Conn, rr state.RuleRow, models map[string]provider.Model, published map[uint32]bool, pubFound bool, cfg Config) []Check {
	area := "rule " + rr.Name
	t, err := catalog.Lookup(ctx, src, rr.SourceTable)
	if errors.Is(err, catalog.ErrNoTable) {
		return []Check{fail(area, "source table", err.Error(), "create the table, or fix source_table (written as PostgreSQL writes a regclass: public.photos)")}
	}
	if err != nil {
		return []Check{fail(area, "source table", err.Error(), "")}
	}
	var out []Check
	col, ok := t.Column(rr.ImageColumn)
	if !ok {
		out = append(out, fail(area, "image column", fmt.Sprintf("%s has no column %s", t, ident(rr.ImageColumn)), "fix image_column (the bare name, exact case)"))
	} else if base, err := baseType(ctx, src, col.TypeOID); err != nil {
		out = append(out, fail(area, "image column", err.Error(), ""))
	} else if base != "bytea" {
		out = append(out, fail(area, "image column", fmt.Sprintf("%s.%s is %s", t, ident(rr.ImageColumn), col.Type), "the image column must be bytea (or a domain over it)"))
	} else {
		out = append(out, pass(area, "image column", fmt.Sprintf("%s.%s (%s)", t, ident(rr.ImageColumn), col.Type)))
	}
	out = append(out, identityCheck(ctx, src, t, area))
	switch {
	case !pubFound:
		out = append(out, pass(area, "published", fmt.Sprintf("publication %s does not exist yet: pgimageai run creates it", ident(cfg.Publication))))
	case published[t.OID]:
		out = append(out, pass(area, "published", fmt.Sprintf("%s is in publication %s", t, ident(cfg.Publication))))
	default:
		out = append(out, warn(area, "published", fmt.Sprintf("%s is not in publication %s yet", t, ident(cfg.Publication)),
			"pgimageai run adds it (it needs to own the table, or be a superuser); until then its changes are not streamed"))
	}
	m, ok := models[rr.Model]
	if !ok {
		return append(out, fail(area, "model", fmt.Sprintf("model %s does not exist", rr.Model), "INSERT INTO pgimageai.models …, or fix the rule's model"))
	}
	if _, err := rules.Bind(cfg.Registry, cfg.Env, m, rr.Function, rr.Prompt); err != nil {
		return append(out, fail(area, "model", err.Error(), "fix the model row or the rule (docs/configuration.md)"))
	}
	return append(out, pass(area, "model", fmt.Sprintf("%s(%s) on provider %s", rr.Function, m.Name, m.Provider)))
}

// identityCheck is whether t's replica identity carries a key, which
// pgoutput needs to send an UPDATE's or DELETE's key.
func identityCheck(ctx context.Context, src *pgx.Conn, t *catalog.Table, area string) Check {
	var ident string
	var index *string
	err := src.QueryRow(ctx, `SELECT c.relreplident::text,
  (SELECT i.indexrelid::regclass::text FROM pg_catalog.pg_index i WHERE i.indrelid = c.oid AND i.indisreplident)
FROM pg_catalog.pg_class c WHERE c.oid = $1`, t.OID).Scan(&ident, &index)
	if err != nil {
		return fail(area, "replica identity", err.Error(), "")
	}
	hasPK := len(t.PrimaryKey) > 0
	switch {
	case ident == "d" && hasPK, ident == "f" && hasPK:
		return pass(area, "replica identity", fmt.Sprintf("the primary key (%v)", t.PrimaryKey))
	case ident == "i" && index != nil:
		return pass(area, "replica identity", "index "+*index)
	}
	fix := fmt.Sprintf("ALTER TABLE %s ADD PRIMARY KEY (…); or ALTER TABLE %s REPLICA IDENTITY USING INDEX <a unique index on NOT NULL columns>;", t.Identifier().Sanitize(), t.Identifier().Sanitize())
	what := map[string]string{"d": "DEFAULT without a primary key", "n": "NOTHING", "f": "FULL without a primary key", "i": "USING INDEX of an index that is gone"}[ident]
	return fail(area, "replica identity", what+": UPDATE and DELETE carry no key", fix)
}

// baseType is the type a column's type stands for, through domains.
func baseType(ctx context.Context, conn *pgx.Conn, oid uint32) (string, error) {
	var name string
	err := conn.QueryRow(ctx, `WITH RECURSIVE d(oid, base, depth) AS (
  SELECT t.oid, t.typbasetype, 0 FROM pg_catalog.pg_type t WHERE t.oid = $1
  UNION ALL SELECT t.oid, t.typbasetype, d.depth + 1 FROM pg_catalog.pg_type t JOIN d ON t.oid = d.base WHERE d.base <> 0 AND d.depth < 32)
SELECT t.typname FROM d JOIN pg_catalog.pg_type t ON t.oid = d.oid WHERE d.base = 0`, oid).Scan(&name)
	if err != nil {
		return "", fmt.Errorf("read the type of the image column: %w", err)
	}
	return name, nil
}

// modelCheck checks that m's server answers one cheap request (GET
// {base_url}/models, no image, nothing paid for).
func modelCheck(ctx context.Context, m provider.Model, cfg Config) Check {
	area := "model " + m.Name
	base := m.BaseURL
	if base == "" {
		base = cfg.BaseURLs[m.Provider]
	}
	if base == "" {
		return pass(area, "reachable", fmt.Sprintf("provider %s calls no server", m.Provider))
	}
	key := ""
	if m.APIKeyEnv != "" {
		if cfg.Env == nil {
			cfg.Env = os.LookupEnv
		}
		v, ok := cfg.Env(m.APIKeyEnv)
		if !ok || v == "" {
			return fail(area, "key", fmt.Sprintf("environment variable %s is not set", m.APIKeyEnv), "set it in the bridge's environment")
		}
		key = v
	}
	if err := cfg.Probe(ctx, base, key); err != nil {
		return fail(area, "reachable", provider.NewRedactor(key).Redact(err.Error()),
			"check base_url, the network path from the bridge to it, and the key")
	}
	return pass(area, "reachable", base+" answers")
}
