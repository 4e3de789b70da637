module github.com/relock-go/relock

go 1.26.0

require (
	github.com/alicebob/miniredis/v2 v2.40.0
	github.com/anishathalye/porcupine v1.3.1
	github.com/google/uuid v1.6.0
	github.com/minio/highwayhash v1.0.4
	github.com/redis/rueidis v1.0.80
	github.com/stretchr/testify v1.12.1
	go.uber.org/goleak v1.3.0
	go.yaml.in/yaml/v3 v3.0.6
	golang.org/x/sys v0.50.0
)

require github.com/yuin/gopher-lua v1.1.1 // indirect
