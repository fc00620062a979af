// Package upstream holds upstream groups: the upstream block's directives, the peers
// with their failure state, and nginx's balancing methods (smooth weighted round
// robin, least_conn, ip_hash, hash with ketama-style consistent hashing, random).
//
// A Group belongs to a configuration snapshot and is shared by all loops; the state
// loops share (a peer's failures) is kept in atomics so that picking a peer takes no
// lock. Each loop has its own Balancer per group (round-robin weights, connection
// counts), as each nginx worker has its own.
//
// A server with resolve (nginx 1.27.3+) is a ResolveServer: its addresses come at
// run time, and the proxy makes a version of the group for its loop each time they
// change (Group.Resolved), with new peers whose failure state that loop keeps.
package upstream
