package server

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/terrace-storage/terrace/internal/device"
)

// Fault injection endpoints — a test hook for the chaos suite
// (internal/chaos), refused unless the node runs with --fault-injection.
//
//	GET  /v1/debug/fault                          every device's injected fault
//	POST /v1/debug/fault?device=ID[&read_err=P&write_err=P&full=1&latency=D]
//	                                              replace the device's fault (no
//	                                              fault parameter clears it)
//
// Like every admin endpoint they need an admin's signature.

// FaultState is one device's injected fault as GET /v1/debug/fault shows it.
type FaultState struct {
	Device string       `json:"device"`
	Fault  device.Fault `json:"fault"`
	Failed bool         `json:"failed"`
}

func (n *Node) registerFaultRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/debug/fault", n.handleFaultList)
	mux.HandleFunc("POST /v1/debug/fault", n.handleFaultSet)
	if n.Config.FaultInjection {
		n.Log.Warn("test hook: device fault injection enabled (POST /v1/debug/fault); never run production nodes with --fault-injection")
	}
}

// faultsEnabled answers 403 unless fault injection is on.
func (n *Node) faultsEnabled(w http.ResponseWriter) bool {
	if !n.Config.FaultInjection {
		writeJSON(w, http.StatusForbidden, APIError{Code: "FaultInjectionDisabled",
			Error: "fault injection is a test hook; start the node with --fault-injection to use it"})
		return false
	}
	return true
}

func (n *Node) handleFaultList(w http.ResponseWriter, _ *http.Request) {
	if !n.faultsEnabled(w) {
		return
	}
	out := []FaultState{}
	for _, d := range n.Devices {
		out = append(out, FaultState{Device: string(d.ID()), Fault: d.InjectedFault(), Failed: d.Failed()})
	}
	writeJSON(w, http.StatusOK, out)
}

func (n *Node) handleFaultSet(w http.ResponseWriter, r *http.Request) {
	if !n.faultsEnabled(w) {
		return
	}
	f, err := parseFault(r)
	var dev *device.Device
	if err == nil {
		id := r.URL.Query().Get("device")
		for _, d := range n.Devices {
			if string(d.ID()) == id {
				dev = d
			}
		}
		if dev == nil {
			err = fmt.Errorf("server: no device %q on node %s", id, n.Config.NodeID)
		}
	}
	if err == nil {
		err = dev.InjectFault(f)
	}
	if err != nil {
		writeJSON(w, http.StatusBadRequest, APIError{Error: err.Error(), Code: "InvalidArgument"})
		return
	}
	n.Log.Warn("test hook: device fault injected", "device", dev.ID(), "fault", f.String())
	writeJSON(w, http.StatusOK, FaultState{Device: string(dev.ID()), Fault: dev.InjectedFault(), Failed: dev.Failed()})
}

func parseFault(r *http.Request) (device.Fault, error) {
	q := r.URL.Query()
	var f device.Fault
	prob := func(name string, dst *float64) error {
		if s := q.Get(name); s != "" {
			p, err := strconv.ParseFloat(s, 64)
			if err != nil {
				return fmt.Errorf("server: fault %s=%q: want a probability", name, s)
			}
			*dst = p
		}
		return nil
	}
	if err := prob("read_err", &f.ReadErr); err != nil {
		return f, err
	}
	if err := prob("write_err", &f.WriteErr); err != nil {
		return f, err
	}
	if s := q.Get("full"); s != "" {
		b, err := strconv.ParseBool(s)
		if err != nil {
			return f, fmt.Errorf("server: fault full=%q: want true or false", s)
		}
		f.Full = b
	}
	if s := q.Get("latency"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			return f, fmt.Errorf("server: fault latency=%q: %w", s, err)
		}
		f.Latency = d
	}
	return f, f.Validate()
}
