// Package config reads the YAML configuration of ddptarget and ddpinitiator
// strictly (unknown fields are errors, and every error names the file, line
// and field) and supplies the embedded defaults the programs run with when
// no file is given.
package config
