// Package accesslog is nginx's ngx_http_log_module: log_format (with escape=),
// access_log to files, to files named by variables and to syslog, with buffer=,
// gzip=, flush= and if=, open_log_file_cache and log_subrequest, inherited as nginx
// does (a level with access_log replaces what it would inherit; with none at any
// level, logs/access.log in the combined format). A line is byte for byte nginx's
// for the same request and format (integration/accesslog_test.go runs both).
//
// # The path of a line
//
// The log phase handler formats the line on the loop that served the request, into
// that loop's buffer for the destination (one per loop and file, from the loop's
// NUMA-local pool; 16 KiB, or buffer=). Whole buffers go to a writer: one thread
// per NUMA domain, kept on the domain's CPUs, which writes them (one writev per
// file for what it finds queued), compresses gzip members, sends syslog datagrams
// and opens files named by variables, then gives each buffer back to its loop. The
// loops never make a file system call, so a slow or full disk stalls no request.
//
// Without buffer=, nginx writes each line at once; here the lines of one event
// batch are handed on at the end of the batch (eventloop.BatchEnd), and while the
// writer still holds a buffer of the loop, the lines of later batches gather in the
// next one until the writer gives a buffer back (it then wakes the loop), so a busy
// loop makes one hand-off per write of the writer rather than one per batch. The
// writer, once such lines come, looks for more every 5 ms (until 100 ms pass
// without any) instead of being woken for each hand-off (a full buffer of a log
// with buffer= wakes it: those are far apart; so do 16 chunks queued while it
// naps, which only a very fast loop hands on within 5 ms): waking a parked thread
// per batch cost about 70 µs of CPU per line when each batch held one request
// (BenchmarkLoggedRequest, cpu-µs/op); polling brought a logged request to about
// the cost of an unlogged one, and polling every 5 ms rather than every
// millisecond cut the writer's CPU per line by more than half. A line reaches
// the kernel within about 10 ms of its batch. The poll is a futex wait the Go
// scheduler does not see, on a P of the writer's own (eventloop.ReserveP:
// GOMAXPROCS counts the loops, the writers and one more), as a loop's epoll_wait:
// time.Sleep on the writer's locked thread handed its P between threads at every
// poll. With buffer=, a buffer goes when the next line would not fit, after
// flush= (a loop timer), at a reload, a reopen and at exit.
//
// A loop lends the writer at most 64 buffers and the writer's queue holds 1024.
// When either is full (the writer is behind: a slow disk, a dead NFS server, a
// FIFO nobody reads) the lines of the buffer are dropped, never waited for, and
// counted; nginx would block its worker instead. DomainStats has the counters
// (lines formatted, written, dropped, failed: lines = written + dropped + failed
// once the writers are idle), and they are logged at exit and on USR1.
//
// USR1 (Reopen) hands on what the loops buffered, waits for the writers (at most
// 5 s), then opens every file again, so that a rotation (mv, then USR1) loses no
// line: lines written before the reopen are in the renamed file, the rest in the
// new one. Files are shared by every configuration that names them, so a reload
// keeps them and the loops' buffers; a file no configuration names any more is
// closed two reloads later. An exiting loop hands everything on and waits for its
// buffers to come back before its pool can close (at most 30 s).
//
// # Where it differs from nginx
//
//   - The default syslog tag is "numaproxy" (nginx's is "nginx").
//   - nginx logs to a file named by variables only if the request's root directory
//     exists; numaproxy has no root here and always logs.
//   - open_log_file_cache is per NUMA domain's writer, not per worker.
//   - $bytes_sent and $body_bytes_sent count what was handed to the connection;
//     nginx counts what the kernel took, which is less only for a client that
//     went away during the response.
//   - log_subrequest has no effect: numaproxy makes no subrequests.
//   - gzip members are compressed by compress/flate, not zlib: other bytes, the same
//     lines (gzip -d reads them).
package accesslog
