package main

import (
	"fmt"
	"io"
	"os"

	"github.com/numaproxy/numaproxy/conf"
)

func main() {
	resolveSelf(os.Args)
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is the whole command; it returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	say := func(format string, a ...any) { fmt.Fprintf(stderr, "numaproxy: "+format+"\n", a...) }
	opts, err := parseOptions(args)
	if err != nil {
		say("%s", err)
		printUsage(stderr)
		return 1
	}
	if opts.help {
		printVersion(stderr, registry, false)
		printUsage(stderr)
		return 0
	}
	if opts.version {
		printVersion(stderr, registry, opts.buildInfo)
		if !opts.test && opts.signal == "" {
			return 0
		}
	}

	load := func() (*conf.Config, error) {
		return conf.Load(conf.Options{Registry: registry, Prefix: opts.prefix, File: opts.confFile, Directives: opts.directives})
	}
	cfg, err := load()
	if opts.test {
		return testConfig(opts, cfg, err, stdout, say)
	}
	if err != nil {
		say("[emerg] %s", err)
		return 1
	}
	// The daemon process daemonize starts: the command that started it has printed
	// the warnings.
	child := takeDaemon()
	if child == nil {
		for _, w := range cfg.Warnings {
			say("[warn] %s", w)
		}
	}
	if opts.signal != "" {
		if err := sendSignal(cfg.Main.PidFile, opts.signal); err != nil {
			say("%s", err)
			return 1
		}
		return 0
	}
	// A binary upgrade's new process stays where the old one started it, as nginx's.
	if _, upgrade := os.LookupEnv(listenersEnv); cfg.Main.Daemon && child == nil && !upgrade {
		return daemonize(stderr)
	}
	return runInstance(cfg, load, opts, stderr, child)
}

// testConfig is -t and -T: nginx's messages, and with -T every file read.
func testConfig(opts *options, cfg *conf.Config, err error, stdout io.Writer, say func(string, ...any)) int {
	file := opts.confFile
	if cfg != nil {
		file = cfg.File
	} else if abs, absErr := conf.MainFile(opts.prefix, opts.confFile); absErr == nil {
		file = abs
	}
	if err != nil {
		say("[emerg] %s", err)
		say("configuration file %s test failed", file)
		return 1
	}
	for _, w := range cfg.Warnings {
		say("[warn] %s", w)
	}
	if !opts.quiet {
		say("the configuration file %s syntax is ok", file)
		say("configuration file %s test is successful", file)
	}
	if opts.dump {
		cfg.Dump(stdout)
	}
	return 0
}
