package sqlstore

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/casleader/casleader/internal/catalog"
	"github.com/casleader/casleader/internal/notify"
)

// NotifyChannel is the PostgreSQL notification channel on which release and
// handover writes announce a free (or handed-over) lease, with the payload given by
// [NotifyPayload]. The PostgreSQL notifier (store/postgres) listens on it.
const NotifyChannel = "casleader"

// NotifyPayload returns the payload of the notification sent when the lease of key in
// table is released at row version version (0: a version not known, as in batched
// releases), or handed over to a candidate not named (version
// [notify.HandedOver]): the table name as configured, the version, and the key,
// separated by single spaces. Table names and versions hold no space, so the first
// two spaces separate the three.
func NotifyPayload(table string, version int64, key string) string {
	return table + " " + strconv.FormatInt(version, 10) + " " + key
}

// HandoverPayload returns the payload of the notification sent when the lease of key
// in table is handed over to candidate to: the table name, then "-1/" and the
// number of characters (not bytes: the database counts them in its own encoding)
// of to, then to, then the key, separated by single spaces. Processes of versions
// that know only [NotifyPayload] drop it, and read the row at their next poll.
func HandoverPayload(table, to, key string) string {
	return table + " " + handoverPrefix + strconv.Itoa(utf8.RuneCountInString(to)) + " " + to + " " + key
}

// handoverPrefix starts the version field of a [HandoverPayload].
const handoverPrefix = "-1/"

// pgHandedTo is the SQL expression of a [HandoverPayload]'s version field for the
// target $1, as the handover statements write it.
const pgHandedTo = `'` + handoverPrefix + `' || char_length($1) || ' ' || $1`

// Payload is a notification's content (see [ParseNotifyPayload]).
type Payload struct {
	Version int64  // the released version, 0 when not known, or notify.HandedOver
	Key     string // the election key
	To      string // with notify.HandedOver: the target, "" when not named
}

// Wake wakes the subscribers of p's key on hub as p announces: a handover to its
// named target ([notify.Hub.HandOver]), or a release (or a handover whose target
// is not named) at p's version.
func (p Payload) Wake(hub *notify.Hub) {
	if p.To != "" {
		hub.HandOver(p.Key, p.To)
		return
	}
	hub.Wake(p.Key, p.Version)
}

// ParseNotifyPayload reads a payload of [NotifyPayload] or [HandoverPayload] for
// table; ok is false for a payload of another table or not of either form.
func ParseNotifyPayload(table, payload string) (p Payload, ok bool) {
	rest, ok := strings.CutPrefix(payload, table+" ")
	if !ok {
		return Payload{}, false
	}
	v, rest, ok := strings.Cut(rest, " ")
	if !ok {
		return Payload{}, false
	}
	if n, isHandover := strings.CutPrefix(v, handoverPrefix); isHandover {
		chars, err := strconv.Atoi(n)
		if err != nil || chars <= 0 || strconv.Itoa(chars) != n {
			return Payload{}, false
		}
		// to is the first chars characters of rest; a space and the key follow.
		end := -1
		for i := range rest {
			if chars == 0 {
				end = i
				break
			}
			chars--
		}
		if end < 0 || rest[end] != ' ' || end+1 == len(rest) || !utf8.ValidString(rest[:end]) {
			return Payload{}, false
		}
		to, key := rest[:end], rest[end+1:]
		return Payload{Version: notify.HandedOver, Key: key, To: to}, true
	}
	version, err := strconv.ParseInt(v, 10, 64)
	if err != nil || (version < 0 && version != notify.HandedOver) || rest == "" {
		return Payload{}, false
	}
	return Payload{Version: version, Key: rest}, true
}

// pgNotify is the SELECT that follows a release or handover's CTE u: one
// notification per row u returns, with the released version given by the SQL
// expression version (a column of u, or 0), and one result row per notification,
// holding the columns cols of u (u must return elect_key too).
func pgNotify(table, cols, version string) string {
	// table passed schema.ValidateTable: letters, digits, underscores and one dot,
	// safe inside a string literal.
	return `SELECT ` + cols + ` FROM (SELECT ` + cols + `, pg_notify('` + NotifyChannel + `', '` + table + ` ' || ` + version + ` || ' ' || elect_key) FROM u) AS n`
}

const (
	// pgAge is the age of tick_time by the database clock, in microseconds.
	pgAge = `(EXTRACT(EPOCH FROM (clock_timestamp() - tick_time)) * 1000000)::bigint`
	// pgEpochMicros is the database clock in microseconds since the Unix epoch:
	// statement_timestamp() is fixed for the statement, so every use gives the same
	// value. It is the first term of an inserted row.
	pgEpochMicros = `(EXTRACT(EPOCH FROM statement_timestamp()) * 1000000)::bigint`
	// pgNewTerm is a new term (see [Core.Elect]). PostgreSQL computes every
	// assignment from the old row.
	pgNewTerm = `GREATEST(version + 1, ` + pgEpochMicros + `)`
)

// pgTakeable is the condition under which an election takes the row e (see
// mysqlTakeable), with the elector's ID and lease in microseconds as the given
// placeholders.
func pgTakeable(e, id, lease string) string {
	return `(` + e + `leader_id = '' OR ` + e + `tick_time <= clock_timestamp() - (CASE WHEN ` + e + `lease > 0 THEN ` + e + `lease ELSE ` + lease + `::bigint END) * interval '1 microsecond'` +
		` OR ` + pgHanded(e, id) + `)`
}

// pgHanded is the condition of a lease of row e handed over to the elector whose
// ID is the given placeholder and not yet claimed.
func pgHanded(e, id string) string {
	return `(` + e + `leader_id = ` + id + ` AND ` + e + `handover_to = ` + id + ` AND ` + e + `stepdown = 0)`
}

func postgresQueries(t, table string) queries {
	const now = "clock_timestamp()"
	return queries{
		observe: `SELECT version, leader_id, term, ` + pgAge + `, handover_to, stepdown, lease, incarnation FROM ` + t + ` WHERE elect_key = $1`,
		insert: `INSERT INTO ` + t + ` (elect_key, version, leader_id, incarnation, lease, term, tick_time, handover_to, stepdown, create_time, update_time)` +
			` VALUES ($1, ` + pgEpochMicros + `, $2, $3, $4, ` + pgEpochMicros + `, ` + now + `, '', 0, ` + now + `, ` + now + `) ON CONFLICT (elect_key) DO NOTHING RETURNING term`,
		elect: `UPDATE ` + t + ` SET version = ` + pgNewTerm + `, term = ` + pgNewTerm +
			`, leader_id = $1, incarnation = $2, lease = $3, tick_time = ` + now + `, handover_to = '', stepdown = 0, update_time = ` + now +
			` WHERE elect_key = $4 AND version = $5 AND ` + pgTakeable("", "$1", "$3") + ` RETURNING term`,
		electReleased: `UPDATE ` + t + ` SET version = ` + pgNewTerm + `, term = ` + pgNewTerm +
			`, leader_id = $1, incarnation = $2, lease = $3, tick_time = ` + now + `, handover_to = '', stepdown = 0, update_time = ` + now +
			` WHERE elect_key = $4 AND ` + releasedVersions + ` AND (leader_id = '' OR ` + pgHanded("", "$1") + `) RETURNING term`,
		renew: `UPDATE ` + t + ` SET version = $1, tick_time = ` + now + `, update_time = ` + now +
			` WHERE elect_key = $2 AND version = $3 AND leader_id = $4`,
		release: `WITH u AS (UPDATE ` + t + ` SET version = $1, leader_id = '', incarnation = '', tick_time = ` + now + `, handover_to = '', stepdown = 0, update_time = ` + now +
			` WHERE elect_key = $2 AND version = $3 AND leader_id = $4 RETURNING elect_key, version) ` + pgNotify(table, "elect_key", "version"),
		handover: `WITH u AS (UPDATE ` + t + ` SET version = ` + pgNewTerm + `, term = ` + pgNewTerm +
			`, leader_id = $1, incarnation = $5, tick_time = ` + now + `, handover_to = $6, stepdown = 0, update_time = ` + now +
			` WHERE elect_key = $2 AND version = $3 AND leader_id = $4 RETURNING elect_key, term) ` + pgNotify(table, "term", pgHandedTo),
		request: `UPDATE ` + t + ` SET version = $1, handover_to = $2, stepdown = 1, update_time = ` + now +
			` WHERE elect_key = $3 AND version = $4 AND leader_id <> ''`,
		check: `SELECT ` + strings.Join(catalog.Columns, ", ") + ` FROM ` + t + ` WHERE false`,
	}
}
