package sqlstore

import (
	"strings"

	"github.com/casleader/casleader/internal/catalog"
)

// mysqlEpochMicros is the database clock in microseconds since the Unix epoch, in
// any session time zone. Like NOW(6), it is evaluated once per statement.
const mysqlEpochMicros = `TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6))`

// mysqlNewTerm is a new term (see [Core.Elect]). It reads only the old version, so it
// gives the same value in every assignment of a statement, whatever the order in
// which the server evaluates them (MariaDB's SIMULTANEOUS_ASSIGNMENT mode included).
const mysqlNewTerm = `GREATEST(version + 1, ` + mysqlEpochMicros + `)`

// mysqlAge is the age of tick_time by the database clock, in microseconds.
const mysqlAge = `TIMESTAMPDIFF(MICROSECOND, tick_time, NOW(6))`

// mysqlTakeable is the condition under which an election takes the row, with one
// placeholder for the elector's lease in microseconds (judging a row that records
// no lease) and two for its ID: a released lease, a lease expired by the lease the
// row records, or a lease handed over to the elector and not yet claimed (see
// [store.Record.Handed]).
const mysqlTakeable = `(leader_id = '' OR ` + mysqlAge + ` >= CASE WHEN lease > 0 THEN lease ELSE ? END` +
	` OR ` + mysqlHanded + `)`

// mysqlHanded is the condition of a lease handed over to the elector and not yet
// claimed, with two placeholders for its ID.
const mysqlHanded = `(leader_id = ? AND handover_to = ? AND stepdown = 0)`

func mysqlQueries(t, _ string) queries {
	const now = "NOW(6)"
	return queries{
		observe: `SELECT version, leader_id, term, ` + mysqlAge + `, handover_to, stepdown, lease, incarnation FROM ` + t + ` WHERE elect_key = ?`,
		insert: `INSERT IGNORE INTO ` + t + ` (elect_key, version, leader_id, incarnation, lease, term, tick_time, handover_to, stepdown, create_time, update_time)` +
			` VALUES (?, LAST_INSERT_ID(` + mysqlEpochMicros + `), ?, ?, ?, ` + mysqlEpochMicros + `, ` + now + `, '', 0, ` + now + `, ` + now + `)`,
		elect: `UPDATE ` + t + ` SET term = LAST_INSERT_ID(` + mysqlNewTerm + `), version = ` + mysqlNewTerm +
			`, leader_id = ?, incarnation = ?, lease = ?, tick_time = ` + now + `, handover_to = '', stepdown = 0, update_time = ` + now +
			` WHERE elect_key = ? AND version = ? AND ` + mysqlTakeable,
		electReleased: `UPDATE ` + t + ` SET term = LAST_INSERT_ID(` + mysqlNewTerm + `), version = ` + mysqlNewTerm +
			`, leader_id = ?, incarnation = ?, lease = ?, tick_time = ` + now + `, handover_to = '', stepdown = 0, update_time = ` + now +
			` WHERE elect_key = ? AND ` + releasedVersions + ` AND (leader_id = '' OR ` + mysqlHanded + `)`,
		renew: `UPDATE ` + t + ` SET version = ?, tick_time = ` + now + `, update_time = ` + now +
			` WHERE elect_key = ? AND version = ? AND leader_id = ?`,
		release: `UPDATE ` + t + ` SET version = ?, leader_id = '', incarnation = '', tick_time = ` + now + `, handover_to = '', stepdown = 0, update_time = ` + now +
			` WHERE elect_key = ? AND version = ? AND leader_id = ?`,
		handover: `UPDATE ` + t + ` SET term = LAST_INSERT_ID(` + mysqlNewTerm + `), version = ` + mysqlNewTerm +
			`, leader_id = ?, incarnation = ?, tick_time = ` + now + `, handover_to = ?, stepdown = 0, update_time = ` + now +
			` WHERE elect_key = ? AND version = ? AND leader_id = ?`,
		request: `UPDATE ` + t + ` SET version = ?, handover_to = ?, stepdown = 1, update_time = ` + now +
			` WHERE elect_key = ? AND version = ? AND leader_id <> ''`,
		check:              `SELECT ` + strings.Join(catalog.Columns, ", ") + ` FROM ` + t + ` WHERE 1 = 0`,
		termByLastInsertID: true,
	}
}
