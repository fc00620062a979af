package steering

// Regenerate steering_bpfel.go and steering_bpfel.o after editing steering.c
// (needs Debian's clang, llvm and libbpf-dev; TestGeneratedUpToDate checks the
// committed files against a fresh build when clang is present).
//go:generate go tool bpf2go -cc clang -strip llvm-strip -target bpfel -go-package steering steering steering.c -- -Wall -Werror -I/usr/include/x86_64-linux-gnu
