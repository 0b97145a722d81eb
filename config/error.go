package config

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Error is one defect found in a configuration file. ParseTarget and
// ParseInitiator return all the defects they found as an errors.Join of
// *Error values sorted by position;
// take them apart with errors.As (the first) or by unwrapping the joined error
// (interface{ Unwrap() []error }).
type Error struct {
	File   string // the file name given to the parser
	Line   int    // 1-based line of the offending text; 0 when the whole file is meant
	Column int    // 1-based column, set only where the line alone is ambiguous (flow collections)
	Path   string // the field, as in targets[0].luns[1].size; empty for document-level defects
	Msg    string // what is wrong, and where it helps, how to fix it
}

// Error formats the defect as file:line[:column]: path: message.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		b.WriteByte(':')
		b.WriteString(strconv.Itoa(e.Line))
		if e.Column > 0 {
			b.WriteByte(':')
			b.WriteString(strconv.Itoa(e.Column))
		}
	}
	b.WriteString(": ")
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// maxErrors bounds how many defects one parse reports; a file with more is
// not worth reading defect by defect.
const maxErrors = 100

// maxKept bounds how many defects are kept to be sorted; past it they are
// only counted. The walk goes in file order (aliases aside), so the first
// maxErrors by position are among the first maxKept found.
const maxKept = 10 * maxErrors

// errs collects defects and joins them, sorted by position.
type errs struct {
	file    string
	list    []*Error
	dropped int // defects past maxKept
}

func (e *errs) add(line, col int, path, format string, args ...any) {
	if len(e.list) >= maxKept {
		e.dropped++
		return
	}
	e.list = append(e.list, &Error{File: e.file, Line: line, Column: col, Path: path, Msg: fmt.Sprintf(format, args...)})
}

// err returns nil or every defect, sorted by line, column and path, as one
// errors.Join. Past maxErrors the rest are counted, not listed.
func (e *errs) err() error {
	if len(e.list) == 0 {
		return nil
	}
	slices.SortStableFunc(e.list, func(a, b *Error) int {
		return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Column, b.Column), strings.Compare(a.Path, b.Path))
	})
	list := make([]error, 0, min(len(e.list), maxErrors+1))
	for i, x := range e.list {
		if i == maxErrors {
			list = append(list, &Error{File: e.file, Msg: fmt.Sprintf("and %d more errors", len(e.list)+e.dropped-maxErrors)})
			break
		}
		list = append(list, x)
	}
	return errors.Join(list...)
}
