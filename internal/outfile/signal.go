package outfile

import (
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

// The temporary files of this process that a signal must not leave
// behind. liveMu also orders renames against the signal handler: the
// handler takes it and never gives it back, so an output is either
// renamed into place whole before the handler runs or removed by it, and
// never half-written under its final name.
var (
	liveMu      sync.Mutex
	live        = map[string]struct{}{}
	handlerOnce sync.Once
)

// stopSignals end a run from outside: kill, timeout, Ctrl-C, a closed
// terminal.
var stopSignals = []os.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP}

// installHandler catches stopSignals once the process has something to
// clean up. A signal the process was started with ignored (nohup, a
// background job's SIGINT) stays ignored: catching it would let it stop a
// run that its caller meant to survive.
func installHandler() {
	var sigs []os.Signal
	for _, s := range stopSignals {
		if !signal.Ignored(s) {
			sigs = append(sigs, s)
		}
	}
	if len(sigs) == 0 {
		return
	}
	c := make(chan os.Signal, 1)
	signal.Notify(c, sigs...)
	go func() {
		s := <-c
		liveMu.Lock() // kept: nothing is renamed into place from now on
		for name := range live {
			os.Remove(name)
		}
		die(s)
	}()
}

// die ends the process the way the signal would have without the handler,
// so that a caller (a shell, timeout, make) sees it killed by s; should
// that fail, it exits with the shell's convention, 128+s.
func die(s os.Signal) {
	signal.Reset(s)
	if p, err := os.FindProcess(os.Getpid()); err == nil && p.Signal(s) == nil {
		time.Sleep(time.Second) // the default action takes effect meanwhile
	}
	n := 0
	if ss, ok := s.(syscall.Signal); ok {
		n = int(ss)
	}
	os.Exit(128 + n)
}

// TempFile creates a temporary file as os.CreateTemp does, removed should
// the process be stopped by a signal before Remove.
func TempFile(dir, pattern string) (*os.File, error) {
	handlerOnce.Do(installHandler)
	liveMu.Lock()
	defer liveMu.Unlock()
	f, err := os.CreateTemp(dir, pattern)
	if err == nil {
		live[f.Name()] = struct{}{}
	}
	return f, err
}

// Remove removes a file made by TempFile. Once removed it is no longer
// the signal handler's to clean (a failed removal leaves it so).
func Remove(name string) error {
	liveMu.Lock()
	defer liveMu.Unlock()
	err := os.Remove(name)
	if err == nil || os.IsNotExist(err) {
		delete(live, name)
	}
	return err
}

// rename puts a file made by TempFile at path, or removes it on failure.
func rename(name, path string) error {
	liveMu.Lock()
	defer liveMu.Unlock()
	err := os.Rename(name, path)
	if err == nil {
		delete(live, name)
		return nil
	}
	if rerr := os.Remove(name); rerr == nil || os.IsNotExist(rerr) {
		delete(live, name)
	}
	return err
}
