package upstream

import "hash/crc32"

func crc32IEEE(s string) uint32 { return crc32.ChecksumIEEE([]byte(s)) }
