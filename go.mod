module github.com/ddpstore/ddpstore

go 1.26.0

require (
	github.com/gostor/gotgt v0.2.2
	github.com/hanwen/go-fuse/v2 v2.12.1
	github.com/pion/logging v0.2.4
	github.com/pion/sctp v1.11.3
	github.com/satori/go.uuid v1.2.0
	github.com/sirupsen/logrus v1.10.2
	golang.org/x/sys v0.49.0
	gopkg.in/yaml.v3 v3.0.1
)

require (
	github.com/kr/pretty v0.3.0 // indirect
	github.com/mitchellh/go-homedir v1.1.0 // indirect
	github.com/pion/randutil v0.1.0 // indirect
	github.com/pion/transport/v5 v5.0.1 // indirect
	gopkg.in/check.v1 v1.0.0-20180628173108-788fd7840127 // indirect
)
