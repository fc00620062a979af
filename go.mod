module github.com/numaproxy/numaproxy

go 1.26.0

require (
	github.com/andybalholm/brotli v1.3.0
	github.com/cilium/ebpf v0.22.0
	github.com/klauspost/compress v1.20.3
	github.com/miekg/dns v1.1.73
	github.com/panjf2000/gnet/v2 v2.9.7
	github.com/valyala/fasthttp v1.78.0
	golang.org/x/crypto v0.58.0
	golang.org/x/net v0.62.0
	golang.org/x/sys v0.50.0
)

require (
	github.com/molecule-man/go-brrr v1.3.1 // indirect
	github.com/valyala/bytebufferpool v1.0.0 // indirect
)

tool github.com/cilium/ebpf/cmd/bpf2go
