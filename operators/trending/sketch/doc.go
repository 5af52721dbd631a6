// Package sketch counts shares per article over sliding event-time windows
// in memory fixed by configuration.
package sketch
