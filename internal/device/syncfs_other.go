//go:build !linux

package device

import (
	"errors"
	"os"
)

func syncfs(*os.File) error { return errors.ErrUnsupported }

func syncfsSupported() error { return errors.ErrUnsupported }

func isMountPoint(string) bool { return false }
