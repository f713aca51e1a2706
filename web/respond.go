package web

import (
	"encoding/json"
	"net/http"
)

// writeJSON writes v as the JSON response body.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// errorBody is the JSON shape of every API error.
type errorBody struct {
	Error   string `json:"error"`
	Details any    `json:"details,omitempty"`
}

// writeError writes {"error": msg, "details": details}.
func writeError(w http.ResponseWriter, status int, msg string, details any) {
	writeJSON(w, status, errorBody{Error: msg, Details: details})
}
