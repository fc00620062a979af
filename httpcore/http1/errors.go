package http1

import "errors"

// ErrNeedMore means the buffer ends before the head (or chunk framing) does:
// append more bytes and call again.
var ErrNeedMore = errors.New("http1: need more data")

// ParseError is a malformed message. Status is the answer nginx would send:
// for requests 400, 414, 501, 505 or 405; for upstream replies 502.
type ParseError struct {
	Status int
	Reason string
}

func (e *ParseError) Error() string { return "http1: " + e.Reason }

// errorKind names one way a message can be malformed. The same kind maps to a
// client status when a request is parsed and to 502 when an upstream reply is.
type errorKind uint8

const (
	errBadRequestLine errorKind = iota
	errBadMethod
	errBadTarget
	errBadVersion
	errUnsupportedVersion
	errRequestLineTooLong
	errHeaderTooLarge
	errTooManyFields
	errBareLF
	errBadLineEnd
	errObsFold
	errSpaceBeforeColon
	errEmptyFieldName
	errBadFieldName
	errBadFieldValue
	errMissingHost
	errDuplicateHost
	errBadHost
	errBadContentLength
	errDuplicateContentLength
	errDuplicateTransferEncoding
	errChunkedNotFinal
	errUnknownTransferEncoding
	errTransferEncodingHTTP10
	errContentLengthAndChunked
	errMethodNotAllowed
	errBadStatusLine
	errBadChunkSize
	errChunkSizeOverflow
	errBadChunkExtension
	errChunkLineTooLong
	errBadChunkEnd
	errBadTrailer
	errTrailerTooLarge
	errForbiddenTrailer
	errChunkOverhead
	errorKinds
)

type errorInfo struct {
	reason        string
	requestStatus int
}

var errorInfos = [errorKinds]errorInfo{
	errBadRequestLine:            {"invalid request line", 400},
	errBadMethod:                 {"invalid method", 400},
	errBadTarget:                 {"invalid request target", 400},
	errBadVersion:                {"invalid HTTP version", 400},
	errUnsupportedVersion:        {"HTTP version not supported", 505},
	errRequestLineTooLong:        {"Request-URI Too Large", 414},
	errHeaderTooLarge:            {"Request Header Or Cookie Too Large", 400},
	errTooManyFields:             {"too many header fields", 400},
	errBareLF:                    {"line ends in bare LF", 400},
	errBadLineEnd:                {"CR not followed by LF", 400},
	errObsFold:                   {"obsolete line folding", 400},
	errSpaceBeforeColon:          {"whitespace between field name and colon", 400},
	errEmptyFieldName:            {"empty field name", 400},
	errBadFieldName:              {"invalid character in field name", 400},
	errBadFieldValue:             {"invalid character in field value", 400},
	errMissingHost:               {"HTTP/1.1 request without Host header", 400},
	errDuplicateHost:             {"duplicate Host header", 400},
	errBadHost:                   {"invalid Host header", 400},
	errBadContentLength:          {"invalid Content-Length header", 400},
	errDuplicateContentLength:    {"duplicate Content-Length header", 400},
	errDuplicateTransferEncoding: {"duplicate Transfer-Encoding header", 400},
	errChunkedNotFinal:           {"chunked is not the final transfer coding", 400},
	errUnknownTransferEncoding:   {"unknown Transfer-Encoding", 501},
	errTransferEncodingHTTP10:    {"HTTP/1.0 request with Transfer-Encoding header", 400},
	errContentLengthAndChunked:   {"Content-Length and Transfer-Encoding headers at the same time", 400},
	errMethodNotAllowed:          {"method not allowed", 405},
	errBadStatusLine:             {"invalid status line", 400},
	errBadChunkSize:              {"invalid chunk size", 400},
	errChunkSizeOverflow:         {"chunk size too large", 400},
	errBadChunkExtension:         {"invalid chunk extension", 400},
	errChunkLineTooLong:          {"chunk size line too long", 400},
	errBadChunkEnd:               {"chunk data not followed by CRLF", 400},
	errBadTrailer:                {"invalid trailer field", 400},
	errTrailerTooLarge:           {"trailer section too large", 400},
	errForbiddenTrailer:          {"field not allowed in a trailer", 400},
	errChunkOverhead:             {"too many chunk extension and trailer bytes", 400},
}

// The errors are built once so that returning one does not allocate.
var requestErrors, upstreamErrors [errorKinds]ParseError

func init() {
	for k, info := range errorInfos {
		requestErrors[k] = ParseError{Status: info.requestStatus, Reason: info.reason}
		upstreamErrors[k] = ParseError{Status: 502, Reason: "upstream sent " + info.reason}
	}
}

func requestError(k errorKind) error  { return &requestErrors[k] }
func upstreamError(k errorKind) error { return &upstreamErrors[k] }
