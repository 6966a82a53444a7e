package node

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/terrace-storage/terrace/internal/zlog/client"
	"github.com/terrace-storage/terrace/internal/zlog/layout"
	"github.com/terrace-storage/terrace/internal/zlog/zlogpb"
)

// Mount adds the shared log's admin API (JSON over HTTP, used by
// `terrace log`):
//
//	GET    /v1/logs                            list logs
//	PUT    /v1/logs/NAME?vector=V&stripes=N&lease-positions=N&lease-hold=D   create
//	DELETE /v1/logs/NAME                       delete
//	GET    /v1/logs/NAME                       status: epoch, tail, sequencer host, segments
//	POST   /v1/logs/NAME/append                append the body; answers {"position": P}
//	GET    /v1/logs/NAME/entries/P             the entry's bytes (404 not written, 410 filled or trimmed)
//	GET    /v1/logs/NAME/tail                  {"tail": T, "epoch": E}
//	POST   /v1/logs/NAME/trim?pos=P            trim one position
//	POST   /v1/logs/NAME/trim?before=P         trim every position below P
//	POST   /v1/logs/NAME/fill?pos=P            fill a hole; answers what P holds
func (s *Service) Mount(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/logs", s.httpList)
	mux.HandleFunc("PUT /v1/logs/{name}", s.httpCreate)
	mux.HandleFunc("DELETE /v1/logs/{name}", s.httpDelete)
	mux.HandleFunc("GET /v1/logs/{name}", s.httpStatus)
	mux.HandleFunc("POST /v1/logs/{name}/append", s.httpAppend)
	mux.HandleFunc("GET /v1/logs/{name}/entries/{pos}", s.httpRead)
	mux.HandleFunc("GET /v1/logs/{name}/tail", s.httpTail)
	mux.HandleFunc("POST /v1/logs/{name}/trim", s.httpTrim)
	mux.HandleFunc("POST /v1/logs/{name}/fill", s.httpFill)
}

// Status is the JSON form of a log's status.
type Status struct {
	Name              string           `json:"name"`
	ID                uint64           `json:"id"`
	Vector            string           `json:"vector"`
	Stripes           int              `json:"stripes"`
	Epoch             uint64           `json:"epoch"`
	Tail              *uint64          `json:"tail,omitempty"`
	Sequencer         string           `json:"sequencer"`
	TrimBefore        uint64           `json:"trim_before"`
	MaxLeasePositions int              `json:"max_lease_positions"`
	MaxLeaseHold      string           `json:"max_lease_hold"`
	Created           time.Time        `json:"created"`
	Segments          []layout.Segment `json:"segments"`
}

// StatusOf converts a LogInfo (tail included when known).
func StatusOf(info *zlogpb.LogInfo, withTail bool) Status {
	rec := client.RecordFromProto(info.Record)
	lay := client.LayoutFromProto(info.Layout)
	st := Status{Name: rec.Name, ID: rec.ID, Vector: rec.Vector, Stripes: rec.Stripes, Epoch: lay.Epoch,
		Sequencer: info.Host, TrimBefore: rec.TrimBefore, MaxLeasePositions: rec.MaxLeasePositions,
		MaxLeaseHold: rec.MaxLeaseHold.String(), Created: time.Unix(0, rec.Created).UTC(), Segments: lay.Segments}
	if st.Segments == nil {
		st.Segments = []layout.Segment{}
	}
	if withTail {
		t := info.Tail
		st.Tail = &t
	}
	return st
}

type apiError struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// writeErr maps client and gRPC errors to HTTP statuses and stable codes.
func writeErr(w http.ResponseWriter, err error) {
	code, name := http.StatusInternalServerError, "InternalError"
	switch {
	case errors.Is(err, client.ErrNoSuchLog) || status.Code(err) == codes.NotFound:
		code, name = http.StatusNotFound, "NoSuchLog"
	case errors.Is(err, client.ErrExists) || status.Code(err) == codes.AlreadyExists:
		code, name = http.StatusConflict, "LogExists"
	case errors.Is(err, client.ErrInvalid) || status.Code(err) == codes.InvalidArgument:
		code, name = http.StatusBadRequest, "InvalidArgument"
	case status.Code(err) == codes.FailedPrecondition:
		code, name = http.StatusConflict, "FailedPrecondition"
	case errors.Is(err, client.ErrUnavailable) || status.Code(err) == codes.Unavailable:
		code, name = http.StatusServiceUnavailable, "Unavailable"
	case errors.Is(err, context.Canceled):
		code, name = 499, "Canceled"
	}
	msg := err.Error()
	if st, ok := status.FromError(err); ok {
		msg = st.Message()
	}
	writeJSON(w, code, apiError{Error: msg, Code: name})
}

func (s *Service) httpReady(w http.ResponseWriter) bool {
	if err := s.ready(); err != nil {
		writeErr(w, err)
		return false
	}
	return true
}

func (s *Service) httpList(w http.ResponseWriter, r *http.Request) {
	if !s.httpReady(w) {
		return
	}
	resp, err := s.ListLogs(r.Context(), &zlogpb.Empty{})
	if err != nil {
		writeErr(w, err)
		return
	}
	out := []Status{}
	for _, info := range resp.Logs {
		out = append(out, StatusOf(info, false))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Service) httpCreate(w http.ResponseWriter, r *http.Request) {
	if !s.httpReady(w) {
		return
	}
	q := r.URL.Query()
	req := &zlogpb.CreateLogRequest{Name: r.PathValue("name"), Vector: q.Get("vector")}
	if v := q.Get("stripes"); v != "" {
		n, err := strconv.ParseUint(v, 10, 32)
		if err != nil {
			writeErr(w, status.Errorf(codes.InvalidArgument, "log: stripes %q: %v", v, err))
			return
		}
		req.Stripes = uint32(n)
	}
	if v := q.Get("lease-positions"); v != "" {
		n, err := strconv.ParseUint(v, 10, 32)
		if err != nil {
			writeErr(w, status.Errorf(codes.InvalidArgument, "log: lease-positions %q: %v", v, err))
			return
		}
		req.MaxLeasePositions = uint32(n)
	}
	if v := q.Get("lease-hold"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			writeErr(w, status.Errorf(codes.InvalidArgument, "log: lease-hold %q: %v", v, err))
			return
		}
		req.MaxLeaseHoldMs = d.Milliseconds()
	}
	info, err := s.CreateLog(r.Context(), req)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, StatusOf(info, false))
}

func (s *Service) httpDelete(w http.ResponseWriter, r *http.Request) {
	if !s.httpReady(w) {
		return
	}
	if _, err := s.DeleteLog(r.Context(), &zlogpb.NameRequest{Name: r.PathValue("name")}); err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"deleted": r.PathValue("name")})
}

func (s *Service) httpStatus(w http.ResponseWriter, r *http.Request) {
	if !s.httpReady(w) {
		return
	}
	info, err := s.client.Info(r.Context(), r.PathValue("name"))
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, StatusOf(info, true))
}

func (s *Service) httpAppend(w http.ResponseWriter, r *http.Request) {
	if !s.httpReady(w) {
		return
	}
	data, err := io.ReadAll(io.LimitReader(r.Body, layout.MaxEntryBytes+1))
	if err != nil {
		writeErr(w, err)
		return
	}
	if len(data) > layout.MaxEntryBytes {
		writeErr(w, status.Errorf(codes.InvalidArgument, "log: entry larger than %d bytes", layout.MaxEntryBytes))
		return
	}
	resp, err := s.Append(r.Context(), &zlogpb.AppendRequest{Name: r.PathValue("name"), Data: data})
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]uint64{"position": resp.Position})
}

func parsePos(w http.ResponseWriter, v, what string) (uint64, bool) {
	p, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		writeErr(w, status.Errorf(codes.InvalidArgument, "log: %s %q is not a position", what, v))
		return 0, false
	}
	return p, true
}

func (s *Service) httpRead(w http.ResponseWriter, r *http.Request) {
	if !s.httpReady(w) {
		return
	}
	pos, ok := parsePos(w, r.PathValue("pos"), "position")
	if !ok {
		return
	}
	if r.URL.Query().Has("fill") {
		// A GET changes nothing: filling is POST .../fill?pos=P.
		writeJSON(w, http.StatusBadRequest, apiError{Error: "log: GET never fills a position; POST /v1/logs/" + r.PathValue("name") +
			"/fill?pos=" + strconv.FormatUint(pos, 10) + " fills a hole, then read it", Code: "InvalidArgument"})
		return
	}
	resp, err := s.ReadEntry(r.Context(), &zlogpb.ReadEntryRequest{Name: r.PathValue("name"), Position: pos})
	if err != nil {
		writeErr(w, err)
		return
	}
	switch {
	case resp.Status == zlogpb.Status_STATUS_NOT_WRITTEN:
		writeJSON(w, http.StatusNotFound, apiError{Error: "log: position " + strconv.FormatUint(pos, 10) + " is not written", Code: "NotWritten"})
	case resp.Kind == zlogpb.Kind_KIND_TRIM:
		writeJSON(w, http.StatusGone, apiError{Error: "log: position " + strconv.FormatUint(pos, 10) + " is trimmed", Code: "Trimmed"})
	case resp.Kind == zlogpb.Kind_KIND_FILL:
		writeJSON(w, http.StatusGone, apiError{Error: "log: position " + strconv.FormatUint(pos, 10) + " is filled (a hole)", Code: "Filled"})
	default:
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", strconv.Itoa(len(resp.Data)))
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(resp.Data)
	}
}

func (s *Service) httpTail(w http.ResponseWriter, r *http.Request) {
	if !s.httpReady(w) {
		return
	}
	l := s.client.Open(r.PathValue("name"), client.LogOptions{})
	tail, err := l.Tail(r.Context())
	if err != nil {
		writeErr(w, err)
		return
	}
	st, _ := s.cache.get(r.PathValue("name"))
	writeJSON(w, http.StatusOK, map[string]uint64{"tail": tail, "epoch": st.Layout.Epoch})
}

func (s *Service) httpTrim(w http.ResponseWriter, r *http.Request) {
	if !s.httpReady(w) {
		return
	}
	q := r.URL.Query()
	name := r.PathValue("name")
	switch {
	case q.Get("before") != "":
		before, ok := parsePos(w, q.Get("before"), "before")
		if !ok {
			return
		}
		if _, err := s.TrimLog(r.Context(), &zlogpb.TrimLogRequest{Name: name, Before: before}); err != nil {
			writeErr(w, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]uint64{"trimmed_before": before})
	case q.Get("pos") != "":
		pos, ok := parsePos(w, q.Get("pos"), "pos")
		if !ok {
			return
		}
		if err := s.client.Open(name, client.LogOptions{}).Trim(r.Context(), pos); err != nil {
			writeErr(w, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]uint64{"trimmed": pos})
	default:
		writeErr(w, status.Error(codes.InvalidArgument, "log: trim needs pos=P or before=P"))
	}
}

func (s *Service) httpFill(w http.ResponseWriter, r *http.Request) {
	if !s.httpReady(w) {
		return
	}
	pos, ok := parsePos(w, r.URL.Query().Get("pos"), "pos")
	if !ok {
		return
	}
	e, err := s.client.Open(r.PathValue("name"), client.LogOptions{}).Fill(r.Context(), pos)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"position": pos, "holds": e.Kind.String()})
}
