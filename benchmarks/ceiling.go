package main

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
)

// ceiling runs redis-benchmark against the server with relock's own acquire
// script (with the library it takes) on random keys: what this Redis can do at all with lock-shaped
// work, to read the other figures against.
func ceiling(s *server) (float64, error) {
	// acquire.lua, unguarded (as scripts.unguarded), with the library it takes.
	body := []byte("local function abandoned() return false end\n")
	for _, part := range []string{"../scripts/locklib.lua", "../scripts/acquire.lua"} {
		b, err := os.ReadFile(part)
		if err != nil {
			return 0, err
		}
		body = append(body, b...)
	}
	_, port, _ := cutLast(s.addr, ":")
	out, err := exec.Command("redis-benchmark", "-h", "127.0.0.1", "-p", port, "-n", "200000", "-c", "50", "-r", "1000000", "-q",
		"EVAL", string(body), "1", "bench:ceiling:__rand_int__", "30000", "00000000-0000-4000-8000-000000000000:1").CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("redis-benchmark: %v: %s", err, out)
	}
	m := regexp.MustCompile(`([\d.]+) requests per second`).FindSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("redis-benchmark said: %s", out)
	}
	return strconv.ParseFloat(string(m[1]), 64)
}

func cutLast(s, sep string) (string, string, bool) {
	for i := len(s) - len(sep); i >= 0; i-- {
		if s[i:i+len(sep)] == sep {
			return s[:i], s[i+len(sep):], true
		}
	}
	return s, "", false
}
