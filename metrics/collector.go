package metrics

import (
	"github.com/numaproxy/numaproxy/healthcheck"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/numaproxy/numaproxy/internal/stats"
	"github.com/numaproxy/numaproxy/server"
)

// The metrics' names and help, made once. Every figure is a sum of the loops' own
// counters at the scrape, labelled by domain; by loop too where the loops of a
// domain may differ (connections, accepting, TLS).
func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc("numaproxy_"+name, help, labels, nil)
}

var (
	dl = []string{"domain", "loop"}

	descAccepted    = desc("connections_accepted_total", "Connections the loop accepted (TLS handshakes included).", dl...)
	descAcceptStops = desc("accept_stops_total", "Times a listener stopped being polled after accept failed (EMFILE, ENOBUFS...) with no idle connection to close, or at worker_connections.", dl...)
	descConns       = desc("connections", "Client connections by state: reading a request head, writing (serving a request), waiting (idle).", "domain", "loop", "state")
	descUpgraded    = desc("connections_upgraded", "Client connections turned into tunnels by an upgrade (WebSocket), also counted as writing.", dl...)
	descAcceptErrs  = desc("accept_errors_total", "accept4 calls that failed (a connection aborted while queued, EMFILE, ENOBUFS...).", dl...)
	descHandled     = desc("http_connections_total", "Client connections that reached the HTTP layer (nginx's accepts and handled).", dl...)
	descPanics      = desc("loop_panics_total", "Handler, task and timer panics the loop recovered.", dl...)
	descTLS         = desc("tls_handshakes_total", "Completed TLS handshakes by the record layer that took the connection: ktls (the kernel) or userspace.", "domain", "loop", "path")
	descTLSFail     = desc("tls_handshake_failures_total", "TLS handshakes that failed (timeouts included).", dl...)
	descTLSTimeout  = desc("tls_handshake_timeouts_total", "TLS handshakes that ran out of time.", dl...)
	descTLSResumed  = desc("tls_handshakes_resumed_total", "TLS handshakes that resumed a session.", dl...)
	descTLSFallback = desc("tls_ktls_fallbacks_total", "Handshakes whose connection the kernel could have taken but userspace kept.", dl...)

	descRequests = desc("http_requests_total", "Requests that ended, by the class of the status sent (none: the connection ended before a response).", "domain", "class")
	descBytesIn  = desc("http_received_bytes_total", "Request heads and bodies received.", "domain")
	descBytesOut = desc("http_sent_bytes_total", "Response heads and bodies sent.", "domain")
	descDuration = desc("http_request_duration_seconds", "Time from a request's head to its end ($request_time).", "domain")

	descZoneRequests = desc("http_zone_requests_total", "Requests of a status_zone, by status class.", "zone", "domain", "class")
	descZoneBytesIn  = desc("http_zone_received_bytes_total", "Request bytes of a status_zone.", "zone", "domain")
	descZoneBytesOut = desc("http_zone_sent_bytes_total", "Response bytes of a status_zone.", "zone", "domain")
	descZoneDuration = desc("http_zone_request_duration_seconds", "Request durations of a status_zone.", "zone", "domain")

	ul                   = []string{"upstream", "peer", "domain"}
	descUpTries          = desc("upstream_requests_total", "Requests sent to an upstream server (each try of a retried request).", ul...)
	descUpReused         = desc("upstream_keepalive_reused_total", "Tries sent on a cached keep-alive connection.", ul...)
	descUpConnectFail    = desc("upstream_connect_failures_total", "Connections to an upstream server that could not be made.", ul...)
	descUpFailures       = desc("upstream_failures_total", "Tries that failed (proxy_next_upstream's error, timeout, invalid_header or a listed status).", ul...)
	descUpRetries        = desc("upstream_retries_total", "Requests passed to the next server after a failure of this one.", ul...)
	descUpResponses      = desc("upstream_responses_total", "Response heads from an upstream server, by status class.", "upstream", "peer", "domain", "class")
	descUpHealthy        = desc("upstream_peer_healthy", "1 while the server passes its health checks (health_check), 0 while it is unhealthy or checking.", "upstream", "peer")
	descUpResponseTime   = desc("upstream_response_time_seconds", "Time from a try's start to its response head ($upstream_response_time).", ul...)
	descRxSampled        = desc("numa_connections_sampled_total", "Connections whose packets' CPU was sampled (SO_INCOMING_CPU at their first request head), by the domain of the loop that served them.", "domain")
	descRxCross          = desc("numa_connections_cross_domain_total", "Sampled connections whose packets the kernel processed on a CPU of another domain than their loop's.", "domain")
	descReloads          = desc("reloads_total", "Configuration reloads since the start, by result.", "result")
	descLoaded           = desc("config_load_timestamp_seconds", "When the running configuration was loaded.")
	descNUMA             = desc("numa_enabled", "1 when loops, listeners and pools are per NUMA domain.")
	descDomainInfo       = desc("domain_info", "A domain of the running plan: its memory node (-1: none) and loops.", "domain", "node", "loops")
	descPoolMapped       = desc("pool_mapped_bytes", "Buffer pool memory mapped so far in a domain's arena.", "domain", "node")
	descPoolInUse        = desc("pool_in_use_bytes", "Buffer pool memory handed out and not returned.", "domain", "node")
	descPoolReleased     = desc("pool_released_bytes_total", "Idle buffer pool memory given back to the kernel.", "domain", "node")
	descPoolBound        = desc("pool_bound", "1 when the domain's buffer pool memory is bound to its node (mbind), 0 when pages go where first touched.", "domain", "node")
	descPoolHeap         = desc("pool_heap_fallback_total", "Buffers taken from the Go heap because the pool could not give one.", "domain", "node")
	descSteerAttached    = desc("steering_attached", "1 when the listen address's SO_REUSEPORT group runs the BPF steering program.", "listen")
	descSteerPackets     = desc("steering_packets_total", "Packets the steering program handled, by domain of the CPU they arrived on (-1: a CPU of no domain) and result: selected (a listener of that domain), fallback (none there: kernel hash), migrated and migrate_fallback (a closing listener's queue).", "listen", "domain", "result")
	descConntrack        = desc("steering_conntrack_clients", "Client addresses in a node's conntrack map of the steering program (an LRU map: at its size it evicts the oldest).", "listen", "node")
	descProcessNodeBytes = desc("process_memory_node_bytes", "The process's resident memory on each NUMA node (/proc/self/numa_maps).", "node")
	descPoolResident     = desc("pool_resident_bytes", "Buffer pool memory of a domain's arena resident on each NUMA node (page_node; /proc/self/numa_maps): the bytes with page_node != node are off the domain's node.", "domain", "node", "page_node")
	descNodeAllocs       = desc("node_page_allocations_total", "The kernel's page allocation counters of a NUMA node (/sys/devices/system/node/node<N>/numastat), system-wide, not this process's only: numa_hit and numa_miss (pages on this node that the allocation's policy did or did not prefer), numa_foreign (pages preferred here but placed elsewhere), local_node and other_node (pages on this node allocated by a task running on this node or on another), interleave_hit.", "node", "stat")
)

// collector is a prometheus.Collector over one scrape's gathering: Collect copies
// the loops' figures (gather) and the server's, and builds constant metrics.
type collector struct {
	m     *server.Monitor
	loops []server.MonitorLoop
}

// Describe sends nothing: the collector is unchecked (its series depend on the
// configuration: zones, upstreams, listen addresses).
func (c *collector) Describe(chan<- *prometheus.Desc) {}

func itoa(i int) string { return strconv.Itoa(i) }

func counter(ch chan<- prometheus.Metric, d *prometheus.Desc, v uint64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
}

func gauge(ch chan<- prometheus.Metric, d *prometheus.Desc, v float64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
}

func histogram(ch chan<- prometheus.Metric, d *prometheus.Desc, h *stats.Histogram, labels ...string) {
	ch <- prometheus.MustNewConstHistogram(d, h.Count(), float64(h.SumNs)/1e9, h.Cumulative(), labels...)
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	figs := gather(c.loops)
	for _, s := range healthcheck.States() {
		v := 0.0
		if s.Healthy {
			v = 1
		}
		gauge(ch, descUpHealthy, v, s.Group, s.Peer)
	}
	domains := map[int]*httpFigures{}
	type zoneKey struct {
		zone   string
		domain int
	}
	zones := map[zoneKey]*httpFigures{}
	type upKey struct {
		group, peer string
		domain      int
	}
	ups := map[upKey]*upFigures{}
	var upOrder []upKey
	rxSampled, rxCross := map[int]uint64{}, map[int]uint64{}
	for _, f := range figs {
		d, l := itoa(f.Domain), itoa(f.Index)
		counter(ch, descAccepted, f.Loop.Accepted, d, l)
		counter(ch, descAcceptStops, f.Loop.AcceptStops, d, l)
		counter(ch, descAcceptErrs, f.Loop.AcceptErrs, d, l)
		gauge(ch, descUpgraded, float64(f.Conns.Upgraded), d, l)
		counter(ch, descHandled, f.Conns.Accepts, d, l)
		counter(ch, descPanics, f.Loop.Panics, d, l)
		gauge(ch, descConns, float64(f.Conns.Reading), d, l, "reading")
		gauge(ch, descConns, float64(f.Conns.Writing), d, l, "writing")
		gauge(ch, descConns, float64(f.Conns.Waiting), d, l, "waiting")
		counter(ch, descTLS, f.TLS.KTLS, d, l, "ktls")
		counter(ch, descTLS, f.TLS.Userspace, d, l, "userspace")
		counter(ch, descTLSFail, f.TLS.Failures, d, l)
		counter(ch, descTLSTimeout, f.TLS.Timeouts, d, l)
		counter(ch, descTLSResumed, f.TLS.Resumed, d, l)
		counter(ch, descTLSFallback, f.TLS.KTLSFallbacks, d, l)

		dom := domains[f.Domain]
		if dom == nil {
			dom = &httpFigures{}
			domains[f.Domain] = dom
		}
		dom.add(&f.HTTP)
		for i := range f.Zones {
			z := &f.Zones[i]
			k := zoneKey{z.Name, f.Domain}
			if zones[k] == nil {
				zones[k] = &httpFigures{}
			}
			zones[k].add(&z.httpFigures)
		}
		for i := range f.Upstreams {
			u := &f.Upstreams[i]
			k := upKey{u.Group, u.Peer, f.Domain}
			if ups[k] == nil {
				ups[k] = &upFigures{}
				upOrder = append(upOrder, k)
			}
			ups[k].add(u)
		}
		for cpu, n := range f.RxCPU {
			rxSampled[f.Domain] += n
			if c.domainOf(cpu) != f.Domain {
				rxCross[f.Domain] += n
			}
		}
	}
	for d, h := range domains {
		ds := itoa(d)
		for class, n := range h.Requests {
			counter(ch, descRequests, n, ds, stats.ClassNames[class])
		}
		counter(ch, descBytesIn, h.BytesIn, ds)
		counter(ch, descBytesOut, h.BytesOut, ds)
		histogram(ch, descDuration, &h.Duration, ds)
		counter(ch, descRxSampled, rxSampled[d], ds)
		counter(ch, descRxCross, rxCross[d], ds)
	}
	for k, h := range zones {
		ds := itoa(k.domain)
		for class, n := range h.Requests {
			counter(ch, descZoneRequests, n, k.zone, ds, stats.ClassNames[class])
		}
		counter(ch, descZoneBytesIn, h.BytesIn, k.zone, ds)
		counter(ch, descZoneBytesOut, h.BytesOut, k.zone, ds)
		histogram(ch, descZoneDuration, &h.Duration, k.zone, ds)
	}
	for _, k := range upOrder {
		u, ds := ups[k], itoa(k.domain)
		counter(ch, descUpTries, u.Tries, k.group, k.peer, ds)
		counter(ch, descUpReused, u.Reused, k.group, k.peer, ds)
		counter(ch, descUpConnectFail, u.ConnectFailures, k.group, k.peer, ds)
		counter(ch, descUpFailures, u.Failures, k.group, k.peer, ds)
		counter(ch, descUpRetries, u.Retries, k.group, k.peer, ds)
		for class, n := range u.Responses {
			counter(ch, descUpResponses, n, k.group, k.peer, ds, stats.ClassNames[class])
		}
		histogram(ch, descUpResponseTime, &u.ResponseTime, k.group, k.peer, ds)
	}
	c.collectServer(ch)
}

// domainOf is the domain of cpu in the running plan; -1 for none.
func (c *collector) domainOf(cpu int) int {
	if c.m == nil {
		return 0
	}
	return c.m.Plan.DomainOf(cpu)
}

// httpFigures.add sums o into f.
func (f *httpFigures) add(o *httpFigures) {
	for i := range f.Requests {
		f.Requests[i] += o.Requests[i]
	}
	f.BytesIn += o.BytesIn
	f.BytesOut += o.BytesOut
	f.Duration.Add(&o.Duration)
}
