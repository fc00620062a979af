// Package resolver is nginx's resolver for numaproxy's event loops: an
// asynchronous DNS client that sends its own queries and never blocks a loop (Go's
// net.Resolver holds a thread per lookup and is not for a loop).
//
// One Resolver serves one loop and is touched only on that loop's thread: its
// cache, sockets and timers are the loop's alone, so lookups take no lock. The
// cost of not sharing: every loop asks the name servers for itself (N loops send N
// queries for a name per TTL), keeps its own copy of each answer, and may hold a
// newer or older answer than another loop for up to the TTL.
//
// The package is also the HTTP module of nginx's resolver and resolver_timeout
// directives (module.go): For gives a request its location's resolver on the
// request's loop, Of a loop's resolver for any settings (an upstream block's).
// A loop makes a resolver on first use, one per set of name servers and
// parameters, and keeps it across reloads with its cache.
//
// What it does as nginx (src/core/ngx_resolver.c) does:
//   - A and AAAA queries (ipv4=, ipv6=), IPv4 addresses first in the result;
//   - answers cached for their smallest TTL, or for valid=; a name not looked up
//     for 30 s is dropped; cached addresses are handed out rotated;
//   - concurrent lookups of a name wait for one query;
//   - servers tried round-robin: a new lookup starts at the next server, a query
//     unanswered for 5 s is sent again to the next server, a send that fails is
//     retried at once on the next one, and resolver_timeout bounds the whole lookup;
//   - a truncated UDP answer is asked again over TCP (nginx since 1.9.11);
//   - a CNAME without addresses is followed, at most 50 deep;
//   - answer codes 2-5 (server failure, host not found, unimplemented, refused)
//     fail the lookup, and so does an answer with no address; format errors and
//     unknown codes are ignored (the query is sent again or times out);
//   - error texts as nginx logs them: "host could not be resolved (3: Host not found)".
//
// Where it differs:
//   - a failed answer is cached for valid= or 10 s. nginx reports a failure valid
//     for that long to its callers but keeps no failure in its cache, so each
//     request for a bad name sends a query again; here it costs one per 10 s;
//   - each query goes out on a new UDP socket connected to the server (a random
//     source port per query, and the kernel drops datagrams from any other
//     address); nginx keeps one socket per server. An answer must match the query's
//     random ID, its question (name, type, class IN), and come from the server;
//   - the addresses of an answer must belong to the name asked or to a CNAME chain
//     starting there in the same answer (nginx takes every A or AAAA record).
package resolver
