// Package outfile writes a program's output file so that it appears under
// its name only when complete: a run that fails or is killed half-way
// leaves no file there that another program takes as whole, and never
// removes what it did not create. A temporary file is removed too when
// SIGTERM, SIGINT or SIGHUP stops the process (signal.go).
package outfile

import (
	"errors"
	"os"
	"path/filepath"
)

// File is an output being written: a temporary file beside its path,
// renamed onto it by Commit; or, for a device or a pipe (/dev/stdout,
// /dev/null, a FIFO), the path itself, written in place.
type File struct {
	*os.File
	path    string
	inPlace bool
}

// Create starts the output for path.
func Create(path string) (*File, error) {
	if st, err := os.Stat(path); err == nil && !st.Mode().IsRegular() {
		if st.IsDir() {
			return nil, &os.PathError{Op: "create", Path: path, Err: errors.New("is a directory")}
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
		if err != nil {
			return nil, err
		}
		return &File{File: f, path: path, inPlace: true}, nil
	}
	f, err := TempFile(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return nil, &os.PathError{Op: "create", Path: path, Err: unwrapPath(err)}
	}
	f.Chmod(0o644) // what os.Create gives under the usual umask; CreateTemp makes 0600
	return &File{File: f, path: path}, nil
}

// unwrapPath strips the temporary name from CreateTemp's error, so the
// message names the path the user gave.
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// Path is the output's final name.
func (f *File) Path() string { return f.path }

// Commit closes the file and puts it at its path (replacing what was
// there). On failure the temporary file is removed.
func (f *File) Commit() error {
	err := f.File.Close()
	if f.inPlace {
		return err
	}
	if err != nil {
		Remove(f.File.Name())
		return err
	}
	return rename(f.File.Name(), f.path)
}

// Abort closes the file and removes what Create made; a device or pipe
// written in place is left alone.
func (f *File) Abort() {
	f.File.Close()
	if !f.inPlace {
		Remove(f.File.Name())
	}
}

// Finish commits when err is nil and aborts otherwise; it returns err, or
// Commit's error: defer func() { err = f.Finish(err) }().
func (f *File) Finish(err error) error {
	if err != nil {
		f.Abort()
		return err
	}
	return f.Commit()
}
