package limit

import (
	"fmt"

	"github.com/numaproxy/numaproxy/conf"
)

// Zones is one configuration's limit_req_zone and limit_conn_zone declarations
// and, once opened, their zones. Names share one namespace as nginx's shared
// memory zones do (nginx's also holds upstream zones and cache keys zones: when
// those exist the namespace belongs in conf/).
type Zones struct {
	Req  map[string]*ReqZone
	Conn map[string]*ConnZone

	reqCfg  map[string]ReqZoneConfig
	connCfg map[string]ConnZoneConfig
}

// DeclareReq adds a limit_req_zone.
func (zs *Zones) DeclareReq(cfg ReqZoneConfig) error {
	if err := zs.declared(cfg.Name, cfg.Size, true, cfg.Pos); err != nil {
		return err
	}
	if old, ok := zs.reqCfg[cfg.Name]; ok {
		return &conf.Error{Pos: cfg.Pos, Msg: "limit_req_zone \"" + cfg.Name + "\" is already bound to key \"" + old.Key + "\""}
	}
	if zs.reqCfg == nil {
		zs.reqCfg = map[string]ReqZoneConfig{}
	}
	zs.reqCfg[cfg.Name] = cfg
	return nil
}

// DeclareConn adds a limit_conn_zone.
func (zs *Zones) DeclareConn(cfg ConnZoneConfig) error {
	if err := zs.declared(cfg.Name, cfg.Size, false, cfg.Pos); err != nil {
		return err
	}
	if old, ok := zs.connCfg[cfg.Name]; ok {
		return &conf.Error{Pos: cfg.Pos, Msg: "limit_conn_zone \"" + cfg.Name + "\" is already bound to key \"" + old.Key + "\""}
	}
	if zs.connCfg == nil {
		zs.connCfg = map[string]ConnZoneConfig{}
	}
	zs.connCfg[cfg.Name] = cfg
	return nil
}

// declared checks name against the zones already declared, as
// ngx_shared_memory_add does.
func (zs *Zones) declared(name string, size int64, req bool, pos conf.Pos) error {
	var old int64
	if c, ok := zs.reqCfg[name]; ok {
		if !req {
			return &conf.Error{Pos: pos, Msg: "the shared memory zone \"" + name + "\" is already declared for a different use"}
		}
		old = c.Size
	} else if c, ok := zs.connCfg[name]; ok {
		if req {
			return &conf.Error{Pos: pos, Msg: "the shared memory zone \"" + name + "\" is already declared for a different use"}
		}
		old = c.Size
	} else {
		return nil
	}
	if size != old {
		return &conf.Error{Pos: pos, Msg: fmt.Sprintf("the size %d of shared memory zone %q conflicts with already declared size %d", size, name, old)}
	}
	return nil
}

// Open makes the declared zones. A zone of prev (the running configuration's)
// with the same name, kind and size keeps its states, as nginx keeps a shared
// zone across a reload.
func (zs *Zones) Open(prev *Zones) error {
	zs.Req, zs.Conn = map[string]*ReqZone{}, map[string]*ConnZone{}
	for name, cfg := range zs.reqCfg {
		var old *ReqZone
		if prev != nil {
			old = prev.Req[name]
		}
		z, err := NewReqZone(cfg, old)
		if err != nil {
			return &conf.Error{Pos: cfg.Pos, Msg: err.Error()}
		}
		zs.Req[name] = z
	}
	for name, cfg := range zs.connCfg {
		var old *ConnZone
		if prev != nil {
			old = prev.Conn[name]
		}
		z, err := NewConnZone(cfg, old)
		if err != nil {
			return &conf.Error{Pos: cfg.Pos, Msg: err.Error()}
		}
		zs.Conn[name] = z
	}
	return nil
}

// ReqLimits resolves a level's limit_req directives to opened zones.
func (zs *Zones) ReqLimits(cfgs []ReqLimitConfig) ([]ReqLimit, error) {
	out := make([]ReqLimit, len(cfgs))
	for i, c := range cfgs {
		z := zs.Req[c.Zone]
		if z == nil {
			return nil, missing(c.Zone, c.Pos, zs.connCfg)
		}
		out[i] = ReqLimit{Zone: z, Burst: c.Burst, Delay: c.Delay}
	}
	return out, nil
}

// ConnLimits resolves a level's limit_conn directives to opened zones.
func (zs *Zones) ConnLimits(cfgs []ConnLimitConfig) ([]ConnLimit, error) {
	out := make([]ConnLimit, len(cfgs))
	for i, c := range cfgs {
		z := zs.Conn[c.Zone]
		if z == nil {
			return nil, missing(c.Zone, c.Pos, zs.reqCfg)
		}
		out[i] = ConnLimit{Zone: z, Conn: uint64(c.Conn)}
	}
	return out, nil
}

// missing is nginx's error for a limit naming no zone of its kind (nginx prints it
// without a place; this one names the directive's).
func missing[T any](name string, pos conf.Pos, other map[string]T) error {
	if _, ok := other[name]; ok {
		return &conf.Error{Pos: pos, Msg: "the shared memory zone \"" + name + "\" is already declared for a different use"}
	}
	return &conf.Error{Pos: pos, Msg: "zero size shared memory zone \"" + name + "\""}
}
