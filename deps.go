//go:build tools

// This file pins the libraries the layers above the iWARP codecs are built on
// (SCSI execution by gotgt in transport/, YAML in config/, logging and system
// calls in the daemons) so that go.mod records the versions the project is
// tested with before the code that imports them lands.
package ddpstore

import (
	_ "github.com/gostor/gotgt/pkg/scsi"
	_ "github.com/sirupsen/logrus"
	_ "golang.org/x/sys/unix"
	_ "gopkg.in/yaml.v3"
)
