# tradeoff_read.gp - written by `attnlab report`; re-run with `gnuplot tradeoff_read.gp` in this directory.
if (!exists("out_png")) out_png = "tradeoff_read.png"
if (!exists("out_svg")) out_svg = "tradeoff_read.svg"
do for [fmt in "png svg"] {
  if (fmt eq "png") {
    set terminal pngcairo noenhanced size 1000,700 font ",11"
    set output out_png
  } else {
    set terminal svg noenhanced size 1000,700 dynamic font ",11"
    set output out_svg
  }
  set title "long_context_text: test loss against bytes read per decoded token (mean over seeds, 95 % intervals)"
  set xlabel "bytes one decode step reads per token at the report context (cache rows and weights, batch 1; log scale)"
  set ylabel "test loss (nats/token)"
  set logscale x 2
  set grid
  set key top right
  set offsets graph 0.08, graph 0.15, graph 0.08, graph 0.08
  set format x "%.0s %cB"
  plot "tradeoff_read.dat" using 1:2:3 with yerrorbars pt 7 ps 1.3 lw 1.5 lc rgb "#1f5fa8" title "mean over seeds, 95 % interval", \
       "" using 1:2:4 with labels left offset char 1,0.7 notitle, \
       "front_read.dat" using 1:2 with steps lw 2 dt 2 lc rgb "#c03030" title "Pareto front (means)"
  unset output
}
