package limit

import (
	"container/list"
	"time"
)

// refZone is ngx_http_limit_req_module.c transliterated, one thread, one zone with
// an exact LRU queue and a capacity in nodes: the model the table is checked
// against.
type refZone struct {
	name  string
	rate  uint64
	cap   int
	nodes map[string]*refNode
	lru   *list.List // front: most recently looked up
	node  *refNode   // ctx->node
}

type refNode struct {
	key    string
	last   int64
	excess int64
	count  int
	elem   *list.Element
}

func newRefZone(name string, rate uint64, capacity int) *refZone {
	return &refZone{name: name, rate: rate, cap: capacity, nodes: map[string]*refNode{}, lru: list.New()}
}

func (z *refZone) lookup(key string, now int64, burst uint64, account bool) (int, uint64) {
	if lr := z.nodes[key]; lr != nil {
		z.lru.MoveToFront(lr.elem)
		ms := now - lr.last
		if ms < -60000 {
			ms = 1
		} else if ms < 0 {
			ms = 0
		}
		excess := lr.excess - int64(z.rate)*ms/1000 + 1000
		if excess < 0 {
			excess = 0
		}
		if uint64(excess) > burst {
			return rcBusy, uint64(excess)
		}
		if account {
			lr.excess = excess
			if ms != 0 {
				lr.last = now
			}
			return rcOK, uint64(excess)
		}
		lr.count++
		z.node = lr
		return rcAgain, uint64(excess)
	}
	z.expire(now, 1)
	if len(z.nodes) >= z.cap {
		z.expire(now, 0)
		if len(z.nodes) >= z.cap {
			return rcError, 0
		}
	}
	lr := &refNode{key: key}
	lr.elem = z.lru.PushFront(lr)
	z.nodes[key] = lr
	if account {
		lr.last = now
		return rcOK, 0
	}
	lr.last, lr.count = 0, 1
	z.node = lr
	return rcAgain, 0
}

func (z *refZone) expire(now int64, n int) {
	for n < 3 {
		e := z.lru.Back()
		if e == nil {
			return
		}
		lr := e.Value.(*refNode)
		if lr.count != 0 {
			return
		}
		if n != 0 {
			ms := now - lr.last
			if ms < 0 {
				ms = -ms
			}
			if ms < 60000 {
				return
			}
			if lr.excess-int64(z.rate)*ms/1000 > 0 {
				return
			}
		}
		n++
		z.lru.Remove(e)
		delete(z.nodes, lr.key)
	}
}

type refLimit struct {
	z            *refZone
	burst, delay uint64
}

// refCheck is ngx_http_limit_req_handler with account and unlock.
func refCheck(limits []refLimit, keys []string, now int64, dryRun bool, status int) (ReqStatus, int, time.Duration, string, uint64) {
	rc := rcDeclined
	var excess uint64
	var limit *refLimit
	n := 0
	for ; n < len(limits); n++ {
		limit = &limits[n]
		if keys[n] == "" {
			continue
		}
		rc, excess = limit.z.lookup(keys[n], now, limit.burst, n == len(limits)-1)
		if rc != rcAgain {
			break
		}
	}
	if rc == rcDeclined {
		return ReqNone, 0, 0, "", 0
	}
	if rc == rcBusy || rc == rcError {
		for i := n - 1; i >= 0; i-- {
			if z := limits[i].z; z.node != nil {
				z.node.count--
				z.node = nil
			}
		}
		if dryRun {
			return ReqRejectedDryRun, 0, 0, limit.z.name, excess
		}
		return ReqRejected, status, 0, limit.z.name, excess
	}
	if rc == rcAgain {
		excess = 0
	}
	var maxDelay uint64
	if excess > limit.delay {
		maxDelay = (excess - limit.delay) * 1000 / limit.z.rate
	}
	for i := n - 1; i >= 0; i-- {
		z := limits[i].z
		lr := z.node
		if lr == nil {
			continue
		}
		ms := now - lr.last
		if ms < -60000 {
			ms = 1
		} else if ms < 0 {
			ms = 0
		}
		ex := lr.excess - int64(z.rate)*ms/1000 + 1000
		if ex < 0 {
			ex = 0
		}
		if ms != 0 {
			lr.last = now
		}
		lr.excess = ex
		lr.count--
		z.node = nil
		if uint64(ex) <= limits[i].delay {
			continue
		}
		if d := (uint64(ex) - limits[i].delay) * 1000 / z.rate; d > maxDelay {
			maxDelay, excess, limit = d, uint64(ex), &limits[i]
		}
	}
	if maxDelay == 0 {
		return ReqPassed, 0, 0, "", 0
	}
	if dryRun {
		return ReqDelayedDryRun, 0, 0, limit.z.name, excess
	}
	return ReqDelayed, 0, time.Duration(maxDelay) * time.Millisecond, limit.z.name, excess
}
