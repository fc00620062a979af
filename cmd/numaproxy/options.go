package main

import (
	"fmt"
	"io"
)

// options is the parsed command line, nginx's flags and meanings.
type options struct {
	help, version, buildInfo bool // -h/-?, -v, -V
	test, dump, quiet        bool // -t, -T, -q
	prefix                   string
	confFile                 string
	directives               string // -g
	signal                   string // -s
}

const usage = `Usage: numaproxy [-?hvVtTq] [-s signal] [-p prefix]
                 [-c filename] [-g directives]

Options:
  -?,-h         : this help
  -v            : show version and exit
  -V            : show version and build information and exit
  -t            : test configuration and exit
  -T            : test configuration, dump it and exit
  -q            : suppress non-error messages during configuration testing
  -s signal     : send signal to the running instance: stop, quit, reopen, reload
  -p prefix     : set prefix path (default: the working directory)
  -c filename   : set configuration file (default: conf/numaproxy.conf)
  -g directives : set global directives out of configuration file
`

// parseOptions reads the command line as nginx's ngx_get_options does: flags may be
// grouped (-tq), and an option's value may be joined (-cfile) or the next argument.
func parseOptions(args []string) (*options, error) {
	o := &options{confFile: "conf/numaproxy.conf"}
	for i := 0; i < len(args); i++ {
		arg := args[i]
		if len(arg) < 2 || arg[0] != '-' {
			return nil, fmt.Errorf("invalid option: %q", arg)
		}
	flags:
		for j := 1; j < len(arg); j++ {
			switch c := arg[j]; c {
			case '?', 'h':
				o.help = true
			case 'v':
				o.version = true
			case 'V':
				o.version, o.buildInfo = true, true
			case 't':
				o.test = true
			case 'T':
				o.test, o.dump = true, true
			case 'q':
				o.quiet = true
			case 'p', 'c', 'g', 's':
				value := arg[j+1:]
				if value == "" {
					if i+1 >= len(args) {
						return nil, fmt.Errorf("option \"-%c\" requires %s", c, map[byte]string{
							'p': "directory name", 'c': "file name", 'g': "parameter", 's': "parameter"}[c])
					}
					i++
					value = args[i]
				}
				switch c {
				case 'p':
					o.prefix = value
				case 'c':
					o.confFile = value
				case 'g':
					o.directives = value
				case 's':
					if _, ok := signalNames[value]; !ok {
						return nil, fmt.Errorf("invalid option: \"-s %s\"", value)
					}
					o.signal = value
				}
				break flags
			default:
				return nil, fmt.Errorf("invalid option: \"%c\"", c)
			}
		}
	}
	return o, nil
}

func printUsage(w io.Writer) { fmt.Fprint(w, usage) }
