package proxy

import (
	"github.com/numaproxy/numaproxy/conf"
	"github.com/numaproxy/numaproxy/httpcore/route"
	"github.com/numaproxy/numaproxy/upstream"
)

// Snapshot is what the data path needs from one configuration, compiled once. A
// request keeps the snapshot it started with to its end, so a reload never changes a
// request in flight.
type Snapshot struct {
	Config   *conf.Config
	Routes   *route.Table
	Groups   *upstream.Groups
	hashKeys map[*upstream.Group]*Template // hash KEY, compiled
}

// NewSnapshot compiles cfg for the data path and creates the client_body_temp_path
// directories that are missing, as nginx does at start and on reload.
func NewSnapshot(cfg *conf.Config) (*Snapshot, error) {
	s := &Snapshot{Config: cfg, Routes: route.Build(cfg), Groups: upstream.GroupsOf(cfg), hashKeys: map[*upstream.Group]*Template{}}
	if err := createTempPaths(cfg); err != nil {
		return nil, err
	}
	for _, g := range s.Groups.List {
		if g.Method == upstream.Hash || g.Method == upstream.HashConsistent {
			t, err := CompileTemplate(g.HashKey)
			if err != nil {
				return nil, &conf.Error{Pos: g.Pos, Msg: "hash key: " + err.Error()}
			}
			s.hashKeys[g] = t
		}
	}
	return s, nil
}

// serverConf is the server level's merged proxy config.
func serverConf(srv *conf.Server) *LocConf { return srv.Conf(Module).(*LocConf) }

// locationConf is a location's merged proxy config.
func locationConf(loc *conf.Location) *LocConf { return loc.Conf(Module).(*LocConf) }
