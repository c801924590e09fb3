package mcp

import (
	"fmt"
	"net/url"
	"time"
)

// OAuthConfig is how a URL server's requests are authorized:
//
//	"oauth": {"grant": "authorization_code", "owner": "fairness",
//	          "client_id": "${GH_CLIENT_ID}", "client_secret": "${GH_CLIENT_SECRET}",
//	          "client_metadata_url": "https://app.example/oauth/client.json",
//	          "scopes": ["repo"], "connect_url": "https://console.example/connect/github"}
//
// With the authorization code grant, tokens belong to a credential owner
// (the call's agent, or its fairness key) and are kept in the token vault;
// a person connects the account on the console. With client credentials
// the worker itself is the client, one identity for every call.
type OAuthConfig struct {
	// Grant is "authorization_code" (the default) or
	// "client_credentials".
	Grant string `json:"grant,omitempty"`
	// Owner is whose token a call uses: "fairness" (the default: the
	// step's context.fairness.key, else its agent) or "agent".
	Owner string `json:"owner,omitempty"`
	// ClientID and ClientSecret are a client registered with the
	// authorization server beforehand (${ENV} is expanded); the secret
	// may be empty for a public client.
	ClientID     string `json:"client_id,omitempty"`
	ClientSecret string `json:"client_secret,omitempty"`
	// ClientMetadataURL is this client's Client ID Metadata Document (an
	// https URL with a path), tried first when the server supports it.
	ClientMetadataURL string `json:"client_metadata_url,omitempty"`
	// DynamicRegistration allows RFC 7591 registration, tried only when
	// neither of the above can be used (default true).
	DynamicRegistration *bool `json:"dynamic_registration,omitempty"`
	// Scopes, when set, are requested instead of the scopes the server
	// advertises.
	Scopes []string `json:"scopes,omitempty"`
	// ConnectURL is where a person connects an account: the auth.required
	// event's url is it with "?server=<name>&key=<owner>". Default: the
	// worker's --mcp-connect-url.
	ConnectURL string `json:"connect_url,omitempty"`
	// MaxStepUps bounds the re-authorizations for more scope that did not
	// help (a 403 insufficient_scope for scopes already granted); past
	// it, calls fail with a tool error instead (default 2).
	MaxStepUps int `json:"max_step_ups,omitempty"`
	// AllowPrivate lets this server, its metadata and its authorization
	// server be reached on loopback or private addresses (an internal
	// server); by default the worker's SSRF guard refuses them.
	AllowPrivate bool `json:"allow_private,omitempty"`
	// Timeout bounds one request to the authorization server (default
	// 10s); MaxResponseBytes one response of it (default 256 KiB).
	Timeout          Duration `json:"timeout,omitzero"`
	MaxResponseBytes int64    `json:"max_response_bytes,omitempty"`
}

// Grants and owners of an OAuthConfig.
const (
	GrantAuthorizationCode = "authorization_code"
	GrantClientCredentials = "client_credentials"
	OwnerFairness          = "fairness"
	OwnerAgent             = "agent"
)

// Defaults of an OAuthConfig.
const (
	DefaultOAuthTimeout     = 10 * time.Second
	DefaultOAuthMaxResponse = 256 << 10
	DefaultMaxStepUps       = 2
)

func (o *OAuthConfig) validate() []string {
	var errs []string
	switch o.Grant {
	case "", GrantAuthorizationCode:
	case GrantClientCredentials:
		if o.ClientID == "" || o.ClientSecret == "" {
			errs = append(errs, "client_credentials needs client_id and client_secret")
		}
	default:
		errs = append(errs, fmt.Sprintf("grant %q is neither authorization_code nor client_credentials", o.Grant))
	}
	switch o.Owner {
	case "", OwnerFairness, OwnerAgent:
	default:
		errs = append(errs, fmt.Sprintf("owner %q is neither fairness nor agent", o.Owner))
	}
	if o.ClientMetadataURL != "" {
		u, err := url.Parse(o.ClientMetadataURL)
		if err != nil || u.Scheme != "https" || u.Path == "" || u.Path == "/" {
			errs = append(errs, "client_metadata_url must be an https URL with a path")
		}
	}
	if o.ConnectURL != "" {
		u, err := url.Parse(o.ConnectURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, "connect_url is not an http(s) URL")
		}
	}
	if o.ClientSecret != "" && o.ClientID == "" {
		errs = append(errs, "client_secret without client_id")
	}
	if o.MaxStepUps < 0 || o.Timeout < 0 || o.MaxResponseBytes < 0 {
		errs = append(errs, "max_step_ups, timeout and max_response_bytes must not be negative")
	}
	return errs
}

func (o *OAuthConfig) clientCredentials() bool { return o != nil && o.Grant == GrantClientCredentials }

// perOwner reports whether the server's sessions are per credential owner.
func (o *OAuthConfig) perOwner() bool { return o != nil && !o.clientCredentials() }

func (o *OAuthConfig) timeout() time.Duration {
	if o.Timeout > 0 {
		return time.Duration(o.Timeout)
	}
	return DefaultOAuthTimeout
}

func (o *OAuthConfig) maxResponse() int64 {
	if o.MaxResponseBytes > 0 {
		return o.MaxResponseBytes
	}
	return DefaultOAuthMaxResponse
}

func (o *OAuthConfig) maxStepUps() int {
	if o.MaxStepUps > 0 {
		return o.MaxStepUps
	}
	return DefaultMaxStepUps
}
