// Placeholder: filled in by the CurlHTTP work.
