// Package console serves the web console of `pgimageai console` (and of
// `pgimageai run --console-addr`): an overview of the rules with their lag,
// pace and cost, a rule's latest results as thumbnails beside what the model
// said, the open errors with their images and, when allowed, their retry,
// and the switches and backfills in progress.
//
// It sits beside the bridge, not in its flow: it reads what the bridge
// stores, through package state for every statement on the pgimageai.*
// tables, and the rules' target and source tables for results and
// thumbnails, on connections pinned to search_path pg_catalog, pg_temp and
// row_security off. Its one write is a retry request, the same row that
// `pgimageai retry` inserts (state.RequestRetry), and only when started with
// retry allowed.
//
// Every page but /healthz needs the token (a Bearer header or the session
// cookie that the login page sets); every POST needs the CSRF token of its
// session; every value from the database or a model is rendered as text by
// html/template under a Content-Security-Policy that allows no inline
// script. Pages, stylesheet and script are embedded (assets/). A Server is
// safe for concurrent use.
//
// Layer: operator.
package console
