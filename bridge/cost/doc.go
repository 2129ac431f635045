// Package cost owns what a call may cost before it is made: the byte budget
// that bounds images and items in flight (and so the memory of the whole
// pipeline), the models' daily budgets of calls and tokens, the cache that
// makes identical work one call, and the lookups of pgimageai.results that
// make an unchanged input no call at all.
//
// It sits below bridge/engine, which charges and asks it before a call, and
// bridge/apply, which releases the budget once items are written. Of the
// bridge it imports bridge/work and bridge/rules only.
//
// Layer: parts.
package cost
