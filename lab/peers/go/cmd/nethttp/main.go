// Command nethttp is the Go net/http peer: the standard library server with Go 1.22 ServeMux
// patterns, GOMAXPROCS=WORKERS, middleware as ordinary func(http.Handler) http.Handler wrappers and
// errors returned by handlers and rendered in one place.
package main

import (
	"encoding/json"
	"errors"
	"log"
	"net/http"
	"strconv"

	"peregrine.lab/peers/go/internal/contract"
)

// serverName is the Server header value (see withServer).
const serverName = "Go net/http"

// handlerFunc is a handler that can fail; errorHandler turns its error into the problem answer.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// httpError is an error with the status it should be answered with.
type httpError struct {
	status int
	err    error
}

func (e *httpError) Error() string { return e.err.Error() }

func badRequest(err error) error { return &httpError{status: http.StatusBadRequest, err: err} }

func (h handlerFunc) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	err := h(w, r)
	if err == nil {
		return
	}
	var he *httpError
	if errors.As(err, &he) {
		http.Error(w, http.StatusText(he.status), he.status)
		return
	}
	writeJSON(w, http.StatusInternalServerError, "application/problem+json", contract.InternalError)
}

// writeJSON serialises v and sends it with an explicit Content-Length (net/http would otherwise
// switch to chunked encoding for bodies over its 2 KiB buffer, and the contract wants a length).
func writeJSON(w http.ResponseWriter, status int, contentType string, v any) error {
	body, err := json.Marshal(v)
	if err != nil {
		return err
	}
	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, err = w.Write(body)
	return err
}

func pathUint(r *http.Request, name string) (uint64, error) {
	v, err := strconv.ParseUint(r.PathValue(name), 10, 64)
	if err != nil {
		return 0, &httpError{status: http.StatusNotFound, err: err}
	}
	return v, nil
}

var hello = []byte("Hello, World!")

func plaintext(w http.ResponseWriter, r *http.Request) error {
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Content-Length", strconv.Itoa(len(hello)))
	_, err := w.Write(hello)
	return err
}

func jsonHello(w http.ResponseWriter, r *http.Request) error {
	return writeJSON(w, http.StatusOK, "application/json", contract.Message{Message: "Hello, World!"})
}

func user(w http.ResponseWriter, r *http.Request) error {
	id, err := pathUint(r, "id")
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, "application/json", contract.NewUserByID(id))
}

func search(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	limit, err := strconv.ParseUint(q.Get("limit"), 10, 64)
	if err != nil || !q.Has("q") {
		return badRequest(errors.New("q and an integer limit are required"))
	}
	return writeJSON(w, http.StatusOK, "application/json", contract.SearchResult{Q: q.Get("q"), Limit: limit})
}

// bodyLimit caps request bodies: net/http itself reads any size (fasthttp, actix, axum and the
// Node frameworks all cap theirs at 1-4 MiB by default).
const bodyLimit = 1 << 20

func createUser(w http.ResponseWriter, r *http.Request) error {
	// Refuse from the declared length first, so a huge announced body is answered at once.
	if r.ContentLength > bodyLimit {
		return &httpError{status: http.StatusRequestEntityTooLarge, err: errors.New("body too large")}
	}
	var u contract.NewUser
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, bodyLimit)).Decode(&u); err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return &httpError{status: http.StatusRequestEntityTooLarge, err: err}
		}
		return badRequest(err)
	}
	return writeJSON(w, http.StatusCreated, "application/json", u)
}

func member(w http.ResponseWriter, r *http.Request) error {
	var m contract.Member
	var err error
	if m.Org, err = pathUint(r, "org"); err != nil {
		return err
	}
	if m.Team, err = pathUint(r, "team"); err != nil {
		return err
	}
	if m.Member, err = pathUint(r, "member"); err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, "application/json", m)
}

var okBody = []byte("OK")

func ok(w http.ResponseWriter, r *http.Request) error {
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Content-Length", "2")
	_, err := w.Write(okBody)
	return err
}

func failing(w http.ResponseWriter, r *http.Request) error {
	return contract.ErrScenario
}

func large(l *contract.Large) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		return writeJSON(w, http.StatusOK, "application/json", l)
	}
}

func empty(w http.ResponseWriter, r *http.Request) error {
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// mark is one middleware layer: it sets its own x-mw-N header and calls the next handler.
func mark(header string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set(header, "1")
			next.ServeHTTP(w, r)
		})
	}
}

// withServer sets the Server header on every answer, the mux's own 404s and 405s included:
// net/http adds Date but no Server header, which the contract requires.
func withServer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Server", serverName)
		next.ServeHTTP(w, r)
	})
}

func main() {
	contract.SetWorkers()
	mux := http.NewServeMux()
	mux.Handle("GET /plaintext", handlerFunc(plaintext))
	mux.Handle("GET /json", handlerFunc(jsonHello))
	mux.Handle("GET /users/{id}", handlerFunc(user))
	mux.Handle("POST /users", handlerFunc(createUser))
	mux.Handle("GET /search", handlerFunc(search))
	mux.Handle("GET /api/v1/orgs/{org}/teams/{team}/members/{member}", handlerFunc(member))
	var stack http.Handler = handlerFunc(ok)
	for _, h := range []string{"X-Mw-5", "X-Mw-4", "X-Mw-3", "X-Mw-2", "X-Mw-1"} {
		stack = mark(h)(stack)
	}
	mux.Handle("GET /middleware", stack)
	mux.Handle("GET /error", handlerFunc(failing))
	mux.Handle("GET /large", large(contract.BuildLarge()))
	mux.Handle("GET /empty", handlerFunc(empty))
	registerDB(mux) // /db /queries /fortunes /updates with DATABASE_URL
	log.Fatal(http.ListenAndServe(contract.Addr(), withServer(mux)))
}
