module peregrine-lab/seeds

go 1.22
