package main

import (
	"reflect"
	"testing"
)

func TestParseOptions(t *testing.T) {
	tests := []struct {
		args []string
		want options
	}{
		{nil, options{confFile: "conf/numaproxy.conf"}},
		{[]string{"-t"}, options{test: true, confFile: "conf/numaproxy.conf"}},
		{[]string{"-tq"}, options{test: true, quiet: true, confFile: "conf/numaproxy.conf"}},
		{[]string{"-T"}, options{test: true, dump: true, confFile: "conf/numaproxy.conf"}},
		{[]string{"-c", "a.conf", "-p", "/srv"}, options{confFile: "a.conf", prefix: "/srv"}},
		{[]string{"-ca.conf", "-p/srv/"}, options{confFile: "a.conf", prefix: "/srv/"}},
		{[]string{"-tc", "a.conf"}, options{test: true, confFile: "a.conf"}},
		{[]string{"-g", "pid x; worker_processes 2;"}, options{directives: "pid x; worker_processes 2;", confFile: "conf/numaproxy.conf"}},
		{[]string{"-s", "reload"}, options{signal: "reload", confFile: "conf/numaproxy.conf"}},
		{[]string{"-squit"}, options{signal: "quit", confFile: "conf/numaproxy.conf"}},
		{[]string{"-V"}, options{version: true, buildInfo: true, confFile: "conf/numaproxy.conf"}},
		{[]string{"-h"}, options{help: true, confFile: "conf/numaproxy.conf"}},
		{[]string{"-?"}, options{help: true, confFile: "conf/numaproxy.conf"}},
	}
	for _, tt := range tests {
		got, err := parseOptions(tt.args)
		if err != nil {
			t.Errorf("%q: %v", tt.args, err)
			continue
		}
		if !reflect.DeepEqual(*got, tt.want) {
			t.Errorf("%q:\n got %+v\nwant %+v", tt.args, *got, tt.want)
		}
	}
}

func TestParseOptionsErrors(t *testing.T) {
	tests := map[string][]string{
		`invalid option: "x"`:                 {"-x"},
		`invalid option: "t"`:                 {"t"},
		`invalid option: "-"`:                 {"-"},
		`option "-c" requires file name`:      {"-c"},
		`option "-p" requires directory name`: {"-t", "-p"},
		`option "-g" requires parameter`:      {"-g"},
		`invalid option: "-s restart"`:        {"-s", "restart"},
		`option "-s" requires parameter`:      {"-s"},
		`invalid option: "z"`:                 {"-tz"},
	}
	for want, args := range tests {
		_, err := parseOptions(args)
		if err == nil || err.Error() != want {
			t.Errorf("%q: err = %v, want %s", args, err, want)
		}
	}
}
