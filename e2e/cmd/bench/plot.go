package main

import (
	"bytes"
	"errors"
	"fmt"
	"image/color"
	"os"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// contenderOrder is the order of the contenders in the charts.
var contenderOrder = []string{limitName, sidemirrorNoLatencyName, sidemirrorName, mm2Name}

// contenderColor is each contender's colour.
var contenderColor = map[string]color.RGBA{
	limitName:               {0x9e, 0x9e, 0x9e, 0xff},
	sidemirrorName:          {0x1f, 0x77, 0xb4, 0xff},
	sidemirrorNoLatencyName: {0xae, 0xc7, 0xe8, 0xff},
	mm2Name:                 {0xff, 0x7f, 0x0e, 0xff},
}

// throughputPlot draws records/s per workload (a group of bars each) per
// contender (a bar of its colour).
func throughputPlot(r *report) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("records/s per workload (%s records each, %s)", thousands(int64(r.Options.Records)), r.Date)
	p.Y.Label.Text = "records/s"
	p.Legend.Top = true
	names := make([]string, len(r.Workloads))
	for i, w := range r.Workloads {
		names[i] = w.Workload.Name
	}
	var present []string
	for _, c := range contenderOrder {
		for _, w := range r.Workloads {
			if w.find(c) != nil {
				present = append(present, c)
				break
			}
		}
	}
	if len(present) == 0 {
		return nil, errors.New("no measurement to plot")
	}
	// About 132 points per workload (throughputPNG): the bars of a
	// workload's contenders fill 90 of them, centred on its tick.
	width := vg.Points(float64(90) / float64(len(present)))
	legend := map[string]bool{}
	for j, w := range r.Workloads {
		var here []*measurement
		for _, c := range present {
			if m := w.find(c); m != nil {
				here = append(here, m)
			}
		}
		for i, m := range here {
			bar, err := plotter.NewBarChart(plotter.Values{m.RecordsPerSecond}, width)
			if err != nil {
				return nil, err
			}
			bar.XMin = float64(j)
			bar.Color = contenderColor[m.Contender]
			bar.LineStyle.Width = 0
			bar.Offset = width * vg.Length(float64(i)-float64(len(here)-1)/2)
			p.Add(bar)
			if !legend[m.Contender] {
				legend[m.Contender] = true
				p.Legend.Add(contenderTitle[m.Contender], bar)
			}
		}
	}
	p.NominalX(names...)
	p.Add(plotter.NewGrid())
	p.Y.Min, p.Y.Max = 0, p.Y.Max*1.3 // room for the legend above the bars
	return p, nil
}

// lagPlots draws, per workload, each mirror's lag (records not yet on the
// destination) over the seconds since its start.
func lagPlots(r *report) ([]*plot.Plot, error) {
	var out []*plot.Plot
	for _, w := range r.Workloads {
		p := plot.New()
		p.Title.Text = "lag while draining: " + w.Workload.Name
		p.X.Label.Text = "seconds since the mirror's start"
		p.Y.Label.Text = "records behind"
		p.X.Min, p.Y.Min = 0, 0
		p.Legend.Top = true
		lines := 0
		for _, c := range contenderOrder {
			m := w.find(c)
			if m == nil || len(m.Lag) == 0 {
				continue
			}
			xys := make(plotter.XYs, len(m.Lag))
			for i, l := range m.Lag {
				xys[i] = plotter.XY{X: l.Seconds, Y: float64(l.Records)}
			}
			line, err := plotter.NewLine(xys)
			if err != nil {
				return nil, err
			}
			line.Color = contenderColor[c]
			line.Width = vg.Points(2)
			p.Add(line)
			p.Legend.Add(contenderTitle[c], line)
			lines++
		}
		if lines > 0 {
			p.Add(plotter.NewGrid())
			p.Y.Max *= 1.4 // room for the legend above the lines
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no lag to plot")
	}
	return out, nil
}

// throughputPNG returns the throughput chart as a PNG image.
func throughputPNG(r *report) ([]byte, error) {
	p, err := throughputPlot(r)
	if err != nil {
		return nil, err
	}
	wt, err := p.WriterTo(vg.Length(120+110*len(r.Workloads))*vg.Length(1.2), 5*vg.Inch, "png")
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if _, err := wt.WriteTo(&b); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// lagPNG returns the lag charts, one above the other, as a PNG image.
func lagPNG(r *report) ([]byte, error) {
	plots, err := lagPlots(r)
	if err != nil {
		return nil, err
	}
	const rowHeight = 3 * vg.Inch
	img := vgimg.New(8*vg.Inch, rowHeight*vg.Length(len(plots)))
	dc := draw.New(img)
	rows := make([][]*plot.Plot, len(plots))
	for i, p := range plots {
		rows[i] = []*plot.Plot{p}
	}
	tiles := draw.Tiles{Rows: len(plots), Cols: 1, PadTop: vg.Points(6), PadBottom: vg.Points(6), PadLeft: vg.Points(6), PadRight: vg.Points(10), PadY: vg.Points(12)}
	canvases := plot.Align(rows, tiles, dc)
	for i, p := range plots {
		p.Draw(canvases[i][0])
	}
	var b bytes.Buffer
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(&b); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func writeThroughputPNG(path string, r *report) error {
	data, err := throughputPNG(r)
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

func writeLagPNG(path string, r *report) error {
	data, err := lagPNG(r)
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}
