//go:build ignore

// SPDX-License-Identifier: (MIT OR GPL-2.0)
//
// sk_reuseport program that keeps a TCP connection on the NUMA domain where
// its SYN arrived: the Linux counterpart of FreeBSD's TCP_REUSPORT_LB_NUMA.
//
// Select (a packet looks for a listener):
//   domain = cpu_domain[current CPU] (or bpf_get_numa_node_id() when
//   use_numa_node_id is set); with n = domain_count[domain] > 0 live
//   listeners, select socks[domain*max_per_domain + hash%n], probing the
//   domain's other slots if that one is momentarily empty. Otherwise return
//   SK_PASS without a selection: the kernel hashes over the whole group
//   (FreeBSD's fallback: a domain without listeners is still served).
//   A real SYN (SYN set; ACK, RST, FIN clear) is also recorded in the
//   conntrack maps of the domain's NUMA node; stray ACKs, RSTs and syncookie
//   ACKs are steered the same way but never counted.
//
// Migrate (ctx->migrating_sk != NULL: a listener is closing with connections
// in its queues, and this runs on the CPU that called close()):
//   domain = the domain recorded for migrating_sk's 4-tuple when its SYN was
//   steered; select another live listener of that domain. Unknown flow or no
//   listener left there: SK_PASS without selection, the kernel hashes.
//
// SK_DROP is never returned: measured on Linux 6.18, SK_DROP from an
// sk_reuseport program makes the listener lookup fail, so the SYN is answered
// with a RST (the client sees ECONNREFUSED at once) rather than dropped
// silently; see TestSKDropAnswersRST.
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

// Limits compiled into the map layouts; the Go side checks its Config against
// them.
#define MAX_DOMAINS 16
#define MAX_PER_DOMAIN 64
#define MAX_NODES 64

#define NO_DOMAIN 0xffffffffu

#define AF_INET 2
#define AF_INET6 10

#define TCP_FLAG_FIN 0x01
#define TCP_FLAG_SYN 0x02
#define TCP_FLAG_RST 0x04
#define TCP_FLAG_ACK 0x10

// Load-time constants, set from Go before the program is loaded.
volatile const __u32 num_domains = 1;
volatile const __u32 max_per_domain = 1;
volatile const __u32 num_nodes = 1;
volatile const __u32 use_numa_node_id = 0;

// A client address, IPv4 as IPv4-mapped IPv6 (::ffff:a.b.c.d).
struct client_key {
	__u8 addr[16];
};

// What a node's conntrack map knows about one client address.
struct client_val {
	__u64 last_seen_ns; // bpf_ktime_get_ns (CLOCK_MONOTONIC) of the last SYN
	__u32 syns[MAX_DOMAINS]; // SYNs received per domain of this node
};

// A connection, as seen from the server: client and server addresses
// (IPv4-mapped for IPv4) and ports in network byte order.
struct flow_key {
	__u8 client[16];
	__u8 server[16];
	__be16 client_port;
	__be16 server_port;
};

// What the migrate path needs to know about a connection.
struct flow_val {
	__u64 syn_ns;  // when its SYN was steered
	__u32 domain;  // the domain it arrived on
	__u32 pad;
};

// Counters kept per CPU, per domain; index num_domains counts packets that
// arrived on a CPU without a domain.
struct domain_stats {
	__u64 selected;         // packet given to a listener of its domain
	__u64 fallback;         // no live listener in the domain: kernel hash
	__u64 migrated;         // queued connection moved to a listener of its domain
	__u64 migrate_fallback; // queued connection of unknown domain or none left: kernel hash
	__u64 not_syn;          // packets that were not a real SYN (steered, not counted)
};

// control[0] = 1 refuses new connections: a real SYN is answered with a RST
// (SK_DROP, see TestSKDropAnswersRST) while what is already queued stays. It lets a
// listen address that a reload removes empty its accept queues before it closes,
// so nothing queued is reset.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} control SEC(".maps");

// [domain][k]: max_per_domain slots per domain, packed densely from k = 0.
struct {
	__uint(type, BPF_MAP_TYPE_REUSEPORT_SOCKARRAY);
	__uint(max_entries, 1); // num_domains * max_per_domain, set from Go
	__type(key, __u32);
	__type(value, __u64);
} socks SEC(".maps");

// Live listeners per domain: slots [0, count) of the domain are in use.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1); // num_domains, set from Go
	__type(key, __u32);
	__type(value, __u32);
} domain_count SEC(".maps");

// CPU number -> domain, NO_DOMAIN for a CPU outside every domain.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1); // possible CPUs, set from Go
	__type(key, __u32);
	__type(value, __u32);
} cpu_domain SEC(".maps");

// Domain -> NUMA node that holds its conntrack maps.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1); // num_domains, set from Go
	__type(key, __u32);
	__type(value, __u32);
} domain_node SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1); // num_domains + 1, set from Go
	__type(key, __u32);
	__type(value, struct domain_stats);
} stats SEC(".maps");

// Conntrack: one LRU map per NUMA node, created on that node by Go
// (BPF_F_NUMA_NODE with the node number; the ELF loader cannot express the
// node). Inner value types are given by size: the loader wants value_size.
struct client_map {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1);
	__uint(map_flags, BPF_F_NUMA_NODE);
	__uint(key_size, sizeof(struct client_key));
	__uint(value_size, sizeof(struct client_val));
};

struct flow_map {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1);
	__uint(map_flags, BPF_F_NUMA_NODE);
	__uint(key_size, sizeof(struct flow_key));
	__uint(value_size, sizeof(struct flow_val));
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, 1); // highest node + 1, set from Go
	__type(key, __u32);
	__array(values, struct client_map);
} ct_clients SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, 1); // highest node + 1, set from Go
	__type(key, __u32);
	__array(values, struct flow_map);
} ct_flows SEC(".maps");

// Inner maps are declared by size, so their key and value types reach BTF (and
// bpf2go's Go declarations) only through these .rodata values, never read.
const volatile struct client_key btf_client_key = {};
const volatile struct client_val btf_client_val = {};
const volatile struct flow_key btf_flow_key = {};
const volatile struct flow_val btf_flow_val = {};

static __always_inline void count(__u32 domain, int field)
{
	__u32 key = domain < num_domains ? domain : num_domains;
	struct domain_stats *s = bpf_map_lookup_elem(&stats, &key);

	if (!s)
		return;
	// Atomic although per CPU: the migrate path runs in process context and
	// a softirq on the same CPU may run the select path meanwhile.
	switch (field) {
	case 0:
		__sync_fetch_and_add(&s->selected, 1);
		break;
	case 1:
		__sync_fetch_and_add(&s->fallback, 1);
		break;
	case 2:
		__sync_fetch_and_add(&s->migrated, 1);
		break;
	case 3:
		__sync_fetch_and_add(&s->migrate_fallback, 1);
		break;
	case 4:
		__sync_fetch_and_add(&s->not_syn, 1);
		break;
	}
}

enum { SELECTED, FALLBACK, MIGRATED, MIGRATE_FALLBACK, NOT_SYN };

// select_in_domain selects a live listener of domain, starting at slot
// hash % n and probing the domain's other used slots when that one is empty
// (a listener closed before Go repacked the domain). Returns 0 on success.
static __always_inline int select_in_domain(struct sk_reuseport_md *ctx, __u32 domain, __u32 hash)
{
	__u32 *np = bpf_map_lookup_elem(&domain_count, &domain);
	__u32 n, start, i;

	if (!np)
		return -1;
	n = *np;
	if (n > max_per_domain)
		n = max_per_domain;
	if (n == 0)
		return -1;
	start = hash % n;
	for (i = 0; i < MAX_PER_DOMAIN; i++) {
		__u32 k, key;

		if (i >= n)
			break;
		k = start + i;
		if (k >= n)
			k -= n;
		key = domain * max_per_domain + k;
		if (bpf_sk_select_reuseport(ctx, &socks, &key, 0) == 0)
			return 0;
	}
	return -1;
}

static __always_inline __u32 domain_of_this_cpu(void)
{
	__u32 cpu, *d;

	if (use_numa_node_id)
		return bpf_get_numa_node_id();
	cpu = bpf_get_smp_processor_id();
	d = bpf_map_lookup_elem(&cpu_domain, &cpu);
	return d ? *d : NO_DOMAIN;
}

static __always_inline void map_v4(__u8 out[16], __be32 addr)
{
	__builtin_memset(out, 0, 10);
	out[10] = 0xff;
	out[11] = 0xff;
	__builtin_memcpy(&out[12], &addr, 4);
}

// read_syn fills f from the packet and reports whether it is a real SYN.
static __always_inline int read_syn(struct sk_reuseport_md *ctx, struct flow_key *f)
{
	__u8 th[14]; // TCP header up to and including the flags byte
	void *data = ctx->data, *data_end = ctx->data_end;

	if (ctx->ip_protocol != IPPROTO_TCP)
		return 0;
	if (data + sizeof(th) <= data_end)
		__builtin_memcpy(th, data, sizeof(th));
	else if (bpf_skb_load_bytes(ctx, 0, th, sizeof(th)) < 0)
		return 0;
	if ((th[13] & (TCP_FLAG_SYN | TCP_FLAG_ACK | TCP_FLAG_RST | TCP_FLAG_FIN)) != TCP_FLAG_SYN)
		return 0;
	__builtin_memcpy(&f->client_port, &th[0], 2);
	__builtin_memcpy(&f->server_port, &th[2], 2);

	if (ctx->eth_protocol == bpf_htons(ETH_P_IP)) {
		struct iphdr ip;

		if (bpf_skb_load_bytes_relative(ctx, 0, &ip, sizeof(ip), BPF_HDR_START_NET) < 0)
			return 0;
		map_v4(f->client, ip.saddr);
		map_v4(f->server, ip.daddr);
		return 1;
	}
	if (ctx->eth_protocol == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr ip6;

		if (bpf_skb_load_bytes_relative(ctx, 0, &ip6, sizeof(ip6), BPF_HDR_START_NET) < 0)
			return 0;
		__builtin_memcpy(f->client, &ip6.saddr, 16);
		__builtin_memcpy(f->server, &ip6.daddr, 16);
		return 1;
	}
	return 0;
}

// record counts a SYN for its client and remembers the flow's domain, both
// in the maps of the domain's node.
static __always_inline void record(struct flow_key *f, __u32 domain)
{
	__u64 now = bpf_ktime_get_ns();
	__u32 node, *np;
	void *clients, *flows;

	if (use_numa_node_id) {
		node = domain;
	} else {
		np = bpf_map_lookup_elem(&domain_node, &domain);
		if (!np)
			return;
		node = *np;
	}

	clients = bpf_map_lookup_elem(&ct_clients, &node);
	if (clients) {
		struct client_key ck;
		struct client_val *cv;

		__builtin_memcpy(ck.addr, f->client, 16);
		cv = bpf_map_lookup_elem(clients, &ck);
		if (!cv) {
			struct client_val zero = {};

			bpf_map_update_elem(clients, &ck, &zero, BPF_NOEXIST);
			cv = bpf_map_lookup_elem(clients, &ck);
		}
		if (cv) {
			if (domain < MAX_DOMAINS)
				__sync_fetch_and_add(&cv->syns[domain], 1);
			cv->last_seen_ns = now;
		}
	}

	flows = bpf_map_lookup_elem(&ct_flows, &node);
	if (flows) {
		struct flow_val fv = { .syn_ns = now, .domain = domain };

		bpf_map_update_elem(flows, f, &fv, BPF_ANY);
	}
}

static __always_inline int do_select(struct sk_reuseport_md *ctx)
{
	__u32 domain = domain_of_this_cpu();
	struct flow_key f = {};
	__u32 zero = 0, *refuse;

	if (read_syn(ctx, &f)) {
		refuse = bpf_map_lookup_elem(&control, &zero);
		if (refuse && *refuse)
			return SK_DROP;
		if (domain < num_domains)
			record(&f, domain);
	} else {
		count(domain, NOT_SYN);
	}
	if (domain < num_domains && select_in_domain(ctx, domain, ctx->hash) == 0) {
		count(domain, SELECTED);
		return SK_PASS;
	}
	count(domain, FALLBACK);
	return SK_PASS;
}

static __always_inline int do_migrate(struct sk_reuseport_md *ctx, struct bpf_sock *m)
{
	struct flow_key f = {};
	__u32 domain = NO_DOMAIN, n;

	// The migrating socket sees the connection from the server side:
	// src = server (src_port in host order), dst = client (dst_port in
	// network order).
	if (m->family == AF_INET) {
		map_v4(f.client, m->dst_ip4);
		map_v4(f.server, m->src_ip4);
	} else if (m->family == AF_INET6) {
		__u32 a;

		a = m->dst_ip6[0]; __builtin_memcpy(&f.client[0], &a, 4);
		a = m->dst_ip6[1]; __builtin_memcpy(&f.client[4], &a, 4);
		a = m->dst_ip6[2]; __builtin_memcpy(&f.client[8], &a, 4);
		a = m->dst_ip6[3]; __builtin_memcpy(&f.client[12], &a, 4);
		a = m->src_ip6[0]; __builtin_memcpy(&f.server[0], &a, 4);
		a = m->src_ip6[1]; __builtin_memcpy(&f.server[4], &a, 4);
		a = m->src_ip6[2]; __builtin_memcpy(&f.server[8], &a, 4);
		a = m->src_ip6[3]; __builtin_memcpy(&f.server[12], &a, 4);
	}
	f.client_port = m->dst_port;
	f.server_port = bpf_htons((__u16)m->src_port);

	for (n = 0; n < MAX_NODES; n++) {
		// A copy for the helper: n itself must stay in a register, or the
		// verifier loses its bounds through the stack and sees no end.
		__u32 node = n;
		void *flows;
		struct flow_val *fv;

		if (n >= num_nodes)
			break;
		flows = bpf_map_lookup_elem(&ct_flows, &node);
		if (!flows)
			continue;
		fv = bpf_map_lookup_elem(flows, &f);
		if (fv) {
			domain = fv->domain;
			break;
		}
	}
	if (domain < num_domains && select_in_domain(ctx, domain, ctx->hash) == 0) {
		count(domain, MIGRATED);
		return SK_PASS;
	}
	count(domain, MIGRATE_FALLBACK);
	return SK_PASS;
}

SEC("sk_reuseport/migrate")
int select_or_migrate(struct sk_reuseport_md *ctx)
{
	struct bpf_sock *m = ctx->migrating_sk;

	if (m)
		return do_migrate(ctx, m);
	return do_select(ctx);
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
