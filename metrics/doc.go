// Package metrics shows what the proxy does: a Prometheus endpoint (the metrics
// directive, a location's content handler), nginx's stub_status page and its
// $connections_* variables, and status_zone, NGINX Plus's per-server and
// per-location figures.
//
//	location = /metrics { metrics; }
//	location = /basic_status { stub_status; }
//	server { status_zone www; location /api/ { status_zone api; ... } }
//
// # Counting without sharing
//
// Every figure is kept by the loop it happens on, in that loop's memory: the
// module's loop state (requests by status class, bytes, a duration histogram, per
// zone; the CPU each connection's packets came in on), the proxy's per-loop upstream
// figures (proxy.PeerStats), the core's connection gauges (httpcore.ConnStats) and
// the TLS layer's handshake counters, one set per loop. A request is counted with
// plain stores in the log phase: no lock, and no atomic at all for the request
// figures (BenchmarkCount: about 10 ns a request, 20 with a server and a location
// zone, 0 allocations). The core's connection gauges, which the status page and the
// variables read synchronously from any loop, are per-loop atomics: three
// uncontended adds a keep-alive request on a line only their loop writes
// (httpcore's BenchmarkConnStats), where nginx's stub status adds to counters
// shared by all its workers.
//
// A scrape never reads a counter while its loop writes it: the scrape's goroutine
// asks each loop for a copy with a task (eventloop.Loop.Run), which runs between
// that loop's events, so every copy is whole; the copies of different loops are a
// few microseconds apart, which a monotonic counter does not mind. A loop that
// exited, or that does not run the task within two seconds, is left out of that
// scrape. The gauges' three states are packed into one word read with one load, so
// the status page never shows a connection in two states or in none.
//
// # Cost when off
//
// The module adds its log phase handler only when some level has metrics,
// stub_status or status_zone, and asks the other modules for their figures
// (httpcore.Setup.EnableStats) only then, or once a template used a $connections_*
// variable: otherwise a request pays nothing for it, the proxy keeps no upstream
// figures and the core moves no gauge.
//
// # The scrape
//
// The metrics handler answers asynchronously: the request's loop starts a
// goroutine and goes on serving; the goroutine gathers the loops' copies, reads the
// server's own figures (buffer pools, BPF steering maps, /proc/self/numa_maps, which
// are syscalls and file reads a loop must not make), encodes them with
// client_golang (the text format 0.0.4, or OpenMetrics 1.0.0 when the Accept header
// asks for it, or the protobuf format) and hands the body back to the loop, which
// sends it. One scrape works at a time.
//
// # What it exposes
//
// All names start with numaproxy_. By domain and loop: connections_accepted_total,
// accept_errors_total, accept_stops_total, http_connections_total,
// connections{state} (reading, writing, waiting), connections_upgraded,
// loop_panics_total, tls_handshakes_total{path} (ktls,
// userspace), tls_handshake_failures_total, tls_handshake_timeouts_total,
// tls_handshakes_resumed_total, tls_ktls_fallbacks_total. By domain:
// http_requests_total{class}, http_received_bytes_total, http_sent_bytes_total,
// http_request_duration_seconds; the same as http_zone_*{zone} per status_zone;
// upstream_requests_total, upstream_keepalive_reused_total,
// upstream_connect_failures_total, upstream_failures_total, upstream_retries_total,
// upstream_responses_total{class} and upstream_response_time_seconds, by upstream
// and peer; upstream_peer_healthy{upstream,peer} (process-wide) for the servers
// health checks probe. NUMA locality: numa_connections_sampled_total and
// numa_connections_cross_domain_total (the connections whose packets the kernel
// processed on a CPU of another domain than the loop that served them, read with
// SO_INCOMING_CPU at each connection's first request head), steering_attached{listen},
// steering_packets_total{listen,domain,result} (selected, fallback, migrated,
// migrate_fallback: the share of fallback is the accepts the program had to send
// elsewhere), numa_enabled, domain_info{domain,node,loops}, pool_mapped_bytes,
// pool_in_use_bytes, pool_released_bytes_total, pool_bound and
// pool_heap_fallback_total by domain and node, pool_resident_bytes{domain,node,
// page_node} (each arena's resident pages by the node they are on, from
// /proc/self/numa_maps: page_node != node is memory off its domain's node),
// process_memory_node_bytes{node} (the whole process's, same file), and
// node_page_allocations_total{node,stat}: the kernel's numastat counters (numa_hit,
// numa_miss, numa_foreign, local_node, other_node, interleave_hit), which count the
// whole machine's page allocations, not this process's only; other_node over
// local_node+other_node is the share placed off the allocating CPU's node
// (TestMemoryLocalityInVM). The process: reloads_total{result} (ok, failed),
// config_load_timestamp_seconds, and client_golang's go_* and process_* metrics.
//
// # Where it differs from nginx
//
// stub_status is allowed in locations only: nginx also takes it at the server
// level, where numaproxy's content handlers do not run. Its accepts and handled are
// equal (a connection numaproxy takes is always handled) and count the connections
// that reached HTTP (after a TLS handshake). The counts start with the first
// configuration that asks for them, not at the process's start; a connection idle
// since before is counted from its next request.
package metrics
