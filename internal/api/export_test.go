package api

// SetAtRevokeLock sets the function an API key revocation calls before it
// waits for the revocation lock (see Server.revokeMu).
func (s *Server) SetAtRevokeLock(f func()) { s.atRevokeLock = f }
