module github.com/numaproxy/numaproxy

go 1.26
