package ui

// LoginPage is the model of /login.
type LoginPage struct {
	// CSRF is the pre-session token of the login form (double-submit cookie).
	CSRF  string
	Next  string // where to go after logging in
	Error string
	Info  string
}

// ErrorPage is the model of an error page (404, 500).
type ErrorPage struct {
	Layout  LayoutProps
	Code    int
	Message string
}
