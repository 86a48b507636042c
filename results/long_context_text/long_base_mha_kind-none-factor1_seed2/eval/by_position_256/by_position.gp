# by_position.gp - written by `attnlab score --by-position`; re-run with
# `gnuplot by_position.gp` in this directory.
if (!exists("out_png")) out_png = "by_position.png"
if (!exists("out_svg")) out_svg = "by_position.svg"
set datafile separator ","
do for [fmt in "png svg"] {
  if (fmt eq "png") {
    set terminal pngcairo noenhanced size 800,500 font ",11"
    set output out_png
  } else {
    set terminal svg noenhanced size 800,500 dynamic font ",11"
    set output out_svg
  }
  set title "mean next-token loss by position (window of 256 tokens)"
  set xlabel "position in the window"
  set ylabel "loss (nats per byte)"
  set grid
  set key off
  # set arrow 1 from 1024, graph 0 to 1024, graph 1 nohead dt 2
  # set label 1 "trained length" at 1024, graph 0.95 right offset -0.5,0
  plot "by_position.csv" every ::1 using (($1 + $2 - 1) / 2.0):3 with linespoints pt 7
}
