// Package authbasic is nginx's auth_basic module as building blocks for the HTTP
// core's access phase: the auth_basic and auth_basic_user_file directives, htpasswd
// files read with nginx's rules, the password schemes nginx 1.22 accepts on Debian 12
// (its own {PLAIN}, {SHA}, {SSHA} and $apr1$, and libcrypt's $1$, $5$, $6$, bcrypt
// $2a$/$2b$/$2y$, DES, bigcrypt and BSDi DES), and a per-domain Verifier that checks
// the slow ones off the event loops. nginx_test.go compares its answers with Debian's
// nginx, request by request.
//
// How the core uses it (http.go does this; the list is for the core's side):
//
//   - per NUMA domain, at start: v, _ := NewVerifier(VerifierConfig{CPUs: domain.CPUs,
//     Nice: 10}); per loop: c := NewChecker(loop, v). Verifiers outlive reloads.
//   - per snapshot, off the loops, before the loops switch to it: for each f in
//     MainConfOf(cfg).Files(), f.Load(log) reads the file and logs what is wrong
//     with its lines (skipping this only makes the first request wait for the read).
//   - access phase, for a request whose location config is lc := ConfOf(loc)
//     (ServerConf when no location matched): o := c.Check(&req.auth, lc, value of
//     Authorization or nil, done). Declined and Allowed go on (with satisfy any,
//     Allowed ends the access phase); Unauthorized answers 401 with
//     "WWW-Authenticate: " + lc.Challenge; Forbidden 403, InternalError 500,
//     Unavailable 503; Pending parks the request until done(a) runs on the loop
//     with the final a.Outcome. Check runs on the loop's thread. The Attempt must
//     not be reused before done has run: a request closed meanwhile keeps its
//     Attempt until then and drops the answer.
//   - logging: if lvl, ok := a.LogLevel(); ok, log a.AppendLog(buf) at lvl with the
//     request's context, as nginx does.
//   - $remote_user is a.User() (or ParseBasic on the header when auth_basic is off).
//
// Where it differs from nginx, and why:
//
//   - nginx opens and reads the user file on every request, on its worker: an edit
//     counts at once, and a slow disk stalls every connection of the worker. Here the
//     file is read at reload and checked again (a stat, and a read if it changed) by
//     a goroutine when a request finds the last check more than RecheckInterval (1 s)
//     old; that request waits for the check, the others use the table they find. An
//     edit counts for requests that start a second after it.
//   - nginx checks bcrypt, SHA-crypt and MD5-crypt on the worker, blocking all its
//     connections for the hash time (bcrypt of cost 12: 0.28 s through Debian's libcrypt here), with no limit on
//     how many wait. Here they run on the domain's Verifier, whose bounded queue turns
//     a flood of logins into 503s instead of memory. {PLAIN}, {SHA}, {SSHA} and DES
//     (µs) are checked on the loop.
//   - yescrypt, gost-yescrypt, scrypt, $2x$ bcrypt, sunmd5, sha1crypt and NT hashes
//     (which nginx accepts through Debian's libcrypt) are refused: 401, with an error
//     line, and a warning when the file is read. For $2a$ hashes, the few passwords
//     for which crypt_blowfish applies its anti-collision countermeasure (some with
//     0xff bytes) never match, since x/crypto/bcrypt has no such mode.
//   - a realm with a line break is refused (nginx copies the realm into the header
//     as it is, and so does numaproxy for quotes and backslashes); a realm made by
//     variables has its control characters percent-encoded.
//   - a user file path made by variables names at most 1024 files per
//     configuration (then 500 and an error line): a path built from what clients
//     send must not grow the process without end. Each is read as the others: at
//     its first use, then checked again at most once a second.
//
// NUMA: each Verifier's workers are locked OS threads pinned to its domain's CPUs,
// and results go back through the submitting loop's task queue, so a check runs on
// the domain of the loop that asked for it. What crosses domains is read-only: the
// user table of a snapshot (built by the reload goroutine, wherever it ran) and the
// file's state, which a check rewrites at most once a second. Verifier workers are
// goroutines like any other and need a Go P to run: with HoldP loops, GOMAXPROCS is
// the loops plus one, so the workers of all domains share that one P with the
// garbage collector unless the process raises GOMAXPROCS for them.
package authbasic
