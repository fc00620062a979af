// Command numaproxy is the proxy's process: nginx's command line (-c -p -t -T -s -g
// -q -v -V), its signals, and the lifecycle of one running instance.
package main
